import { RateLimiterPostgres, RateLimiterRes } from "rate-limiter-flexible";
import { db } from "./db.server.ts";
import { env } from "./env.server.ts";
import { logger } from "./logger.server.ts";

// Counters live in PostgreSQL (table rate_limits, created by migration 0001), so every web
// replica shares them. Numbers for the per-IP scopes are ours: docs/decisions/0003-rate-limits.md.
export const rateLimitScopes = {
  gateway: { points: 100, duration: 60, key: "user-or-ip" },
  agents: { points: 100, duration: 60, key: "user-or-ip" },
  chat: { points: 60, duration: 60, key: "user-or-ip" },
  instance: { points: 30, duration: 60, key: "user-or-ip" },
  // Metrics (ours): the public /api/metrics per IP, the per-user ones per user
  // (docs/decisions/0092-metrics-endpoints.md).
  metrics: { points: 60, duration: 60, key: "user-or-ip" },
  provision: { points: 10, duration: 60 * 60, key: "ip" },
  register: { points: 10, duration: 60 * 60, key: "ip" },
  // Organisations made per person an hour (each is an account row: decision 0203).
  organisations: { points: 10, duration: 60 * 60, key: "user-or-ip" },
  // Invitations sent per person an hour (each sends an email: decision 0204).
  invitations: { points: 30, duration: 60 * 60, key: "user-or-ip" },
  // Domain verifications per person a minute (each asks DNS: decision 0212).
  "organisation-domain-verify": { points: 20, duration: 60, key: "user-or-ip" },
  // SCIM calls per organisation's token a minute (an identity provider's sync: decision 0213).
  scim: { points: 600, duration: 60, key: "account" },
  "forgot-password": { points: 5, duration: 15 * 60, key: "ip" },
  "reset-password": { points: 10, duration: 15 * 60, key: "ip" },
  "email-change": { points: 10, duration: 15 * 60, key: "ip" },
  // Public identity endpoints (SIWE nonces write a row each; the others call the chain or the
  // identity network): docs/decisions/0051-wallet-sign-in.md
  identity: { points: 60, duration: 60, key: "ip" },
  // Organisation SSO lookups and SAML assertions per IP (each ACS call checks a signature and
  // writes its assertion id): docs/decisions/0211.
  sso: { points: 60, duration: 60, key: "ip" },
  // Hosted wallets, splits and escrow (each call reads the chain; some send transfers):
  // docs/decisions/0125-hosted-wallets.md
  payments: { points: 60, duration: 60, key: "user-or-ip" },
  // Failed sign-ins per email address (consumed on failure only, cleared on success):
  // docs/decisions/0010-accounts-and-sign-in.md
  "signin-failures": { points: 5, duration: 15 * 60, key: "account" },
  // Failed password sign-ins per client address (an IPv6 client by its /64), whatever the email:
  // counted before the check, a success refunds its point. docs/decisions/0196
  "signin-address": { points: 20, duration: 15 * 60, key: "ip" },
} as const satisfies Record<
  string,
  { points: number; duration: number; key: "ip" | "user-or-ip" | "account" }
>;

export type RateLimitScope = keyof typeof rateLimitScopes;

export interface RateLimitDecision {
  allowed: boolean;
  headers: Record<string, string>;
}

const limiters = new Map<RateLimitScope, RateLimiterPostgres>();

/** rate-limiter-flexible speaks node-postgres; this adapts postgres.js to its `query` call. */
function storeClient() {
  const sql = db();
  return {
    query: async ({ text, values }: { text: string; values?: unknown[] }) => {
      const rows = await sql.unsafe(text, (values ?? []) as never[], { prepare: true });
      // `rowCount` too: the store's get() and delete() read it.
      return { rows, rowCount: rows.count ?? rows.length };
    },
  };
}

function limiter(scope: RateLimitScope): RateLimiterPostgres {
  let l = limiters.get(scope);
  if (!l) {
    const { duration } = rateLimitScopes[scope];
    const points = pointsOf(scope);
    l = new RateLimiterPostgres({
      storeClient: storeClient(),
      storeType: "pool",
      tableName: "rate_limits",
      tableCreated: true,
      clearExpiredByTimeout: false,
      keyPrefix: scope,
      points,
      duration,
    });
    limiters.set(scope, l);
  }
  return l;
}

/** Drops cached limiters (their store client is bound to one pool) and local leases. */
export function resetRateLimiters(): void {
  limiters.clear();
  leases.clear();
  leasing.clear();
}

/**
 * Points this process took from the shared counter and hands out locally, so a busy key costs
 * one database round trip per lease rather than one per request. A lease never grants a point
 * the counter did not give: one replica is exact; with several, a key can be refused while up
 * to (replicas - 1) × lease size of its points sit unused elsewhere (stricter, never looser).
 * docs/decisions/0003-rate-limits.md
 */
interface Lease {
  left: number;
  /** The counter's remaining points when the lease was taken. */
  sharedRemaining: number;
  resetAt: number;
}
const leases = new Map<string, Lease>();
const leasing = new Map<string, Promise<void>>();
const MAX_LEASES = 10_000;

/** 5 % of a window's points: 5 of /api/agents' 100, 1 of provision's 10 (no batching). */
const leaseSize = (points: number) => Math.max(1, Math.floor(points / 20));

async function takeLease(scope: RateLimitScope, key: string, id: string): Promise<void> {
  const points = pointsOf(scope);
  const size = leaseSize(points);
  const now = Date.now();
  if (leases.size >= MAX_LEASES) {
    for (const [k, l] of leases) if (l.resetAt <= now) leases.delete(k);
  }
  try {
    const res = await limiter(scope).consume(key, size);
    leases.set(id, {
      left: size,
      sharedRemaining: res.remainingPoints,
      resetAt: now + Math.max(1, res.msBeforeNext),
    });
  } catch (rejection) {
    if (!(rejection instanceof RateLimiterRes)) throw rejection;
    // The counter went past the limit by this lease: the points that were still free are ours.
    const free = points - (rejection.consumedPoints - size);
    leases.set(id, {
      left: Math.max(0, Math.min(size, free)),
      sharedRemaining: 0,
      resetAt: now + Math.max(1, rejection.msBeforeNext),
    });
  }
}

/** A scope's points; RATE_LIMIT_SCALE multiplies them (benchmarks: the limiter runs, never refuses). */
const pointsOf = (scope: RateLimitScope) => rateLimitScopes[scope].points * env().RATE_LIMIT_SCALE;

function headersFor(scope: RateLimitScope, lease: Lease, limited: boolean) {
  const { duration } = rateLimitScopes[scope];
  const points = pointsOf(scope);
  const reset = Math.max(1, Math.ceil((lease.resetAt - Date.now()) / 1000));
  const headers: Record<string, string> = {
    "RateLimit-Limit": String(points),
    "RateLimit-Remaining": String(Math.max(0, lease.sharedRemaining + lease.left)),
    "RateLimit-Reset": String(reset),
    "RateLimit-Policy": `${points};w=${duration}`,
  };
  if (limited) headers["Retry-After"] = String(reset);
  return headers;
}

/** Takes one point from `key`'s bucket in `scope`. */
export async function consume(scope: RateLimitScope, key: string): Promise<RateLimitDecision> {
  const id = `${scope}\u0000${key}`;
  for (;;) {
    const lease = leases.get(id);
    if (lease && lease.resetAt > Date.now()) {
      if (lease.left > 0) {
        lease.left--;
        return { allowed: true, headers: headersFor(scope, lease, false) };
      }
      // Fixed windows: once the counter is spent it stays spent until the window ends.
      if (lease.sharedRemaining === 0) {
        return { allowed: false, headers: headersFor(scope, lease, true) };
      }
    }
    // One lease request per key at a time; concurrent requests wait for it.
    let pending = leasing.get(id);
    if (!pending) {
      pending = takeLease(scope, key, id).finally(() => leasing.delete(id));
      leasing.set(id, pending);
    }
    try {
      await pending;
    } catch (error) {
      // The store failed: serve the request rather than take the API down with the limiter.
      logger().error({ err: error, scope }, "rate limiter unavailable; request allowed");
      return { allowed: true, headers: {} };
    }
  }
}

/**
 * For failure counters: counts an attempt *before* it is checked, in one statement, and answers
 * the seconds until `key` may try again when its budget in `scope` is spent (else 0). Counting
 * first means a burst of concurrent attempts runs at most the budget's checks (reading the
 * counter and penalising after a failed check let every attempt of a burst through); a success
 * then `forgive`s the key.
 */
export async function attempt(scope: RateLimitScope, key: string): Promise<number> {
  leases.delete(`${scope}\u0000${key}`);
  try {
    await limiter(scope).consume(key, 1);
    return 0;
  } catch (rejection) {
    if (rejection instanceof RateLimiterRes) {
      return Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));
    }
    logger().error({ err: rejection, scope }, "rate limiter unavailable; request allowed");
    return 0;
  }
}

/** Gives back the point an `attempt` took (the attempt succeeded), leaving the rest counted. */
export async function refund(scope: RateLimitScope, key: string): Promise<void> {
  leases.delete(`${scope}\u0000${key}`);
  await limiter(scope)
    .reward(key, 1)
    .catch((error: unknown) => logger().error({ err: error, scope }, "rate limiter unavailable"));
}

/** Forgets `key`'s counter in `scope`. */
export async function forgive(scope: RateLimitScope, key: string): Promise<void> {
  leases.delete(`${scope}\u0000${key}`);
  await limiter(scope)
    .delete(key)
    .catch((error: unknown) => logger().error({ err: error, scope }, "rate limiter unavailable"));
}
