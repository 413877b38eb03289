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
  provision: { points: 10, duration: 60 * 60, key: "ip" },
  register: { points: 10, duration: 60 * 60, key: "ip" },
  "forgot-password": { points: 5, duration: 15 * 60, key: "ip" },
  "reset-password": { points: 10, duration: 15 * 60, key: "ip" },
  // Public identity endpoints (SIWE nonces write a row each; the others call the chain or the
  // identity network): docs/decisions/0051-wallet-sign-in.md
  identity: { points: 60, duration: 60, key: "ip" },
  // Failed sign-ins per email address (consumed on failure only, cleared on success):
  // docs/decisions/0010-accounts-and-sign-in.md
  "signin-failures": { points: 5, duration: 15 * 60, key: "account" },
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

/** Drops cached limiters (their store client is bound to one pool). */
export function resetRateLimiters(): void {
  limiters.clear();
}

/** A scope's points; RATE_LIMIT_SCALE multiplies them (benchmarks: the limiter runs, never refuses). */
const pointsOf = (scope: RateLimitScope) => rateLimitScopes[scope].points * env().RATE_LIMIT_SCALE;

function headersFor(scope: RateLimitScope, res: RateLimiterRes, limited: boolean) {
  const { duration } = rateLimitScopes[scope];
  const points = pointsOf(scope);
  const reset = Math.max(1, Math.ceil(res.msBeforeNext / 1000));
  const headers: Record<string, string> = {
    "RateLimit-Limit": String(points),
    "RateLimit-Remaining": String(Math.max(0, res.remainingPoints)),
    "RateLimit-Reset": String(reset),
    "RateLimit-Policy": `${points};w=${duration}`,
  };
  if (limited) headers["Retry-After"] = String(reset);
  return headers;
}

/** Takes one point from `key`'s bucket in `scope`. */
export async function consume(scope: RateLimitScope, key: string): Promise<RateLimitDecision> {
  try {
    const res = await limiter(scope).consume(`${key}`);
    return { allowed: true, headers: headersFor(scope, res, false) };
  } catch (rejection) {
    if (rejection instanceof RateLimiterRes) {
      return { allowed: false, headers: headersFor(scope, rejection, true) };
    }
    // The store failed: serve the request rather than take the API down with the limiter.
    logger().error({ err: rejection, scope }, "rate limiter unavailable; request allowed");
    return { allowed: true, headers: {} };
  }
}

/**
 * For failure counters: the seconds until `key` may try again when its budget in `scope` is
 * spent, else 0. Reads without consuming.
 */
export async function blockedFor(scope: RateLimitScope, key: string): Promise<number> {
  try {
    const res = await limiter(scope).get(key);
    if (!res || res.remainingPoints > 0) return 0;
    return Math.max(1, Math.ceil(res.msBeforeNext / 1000));
  } catch (error) {
    logger().error({ err: error, scope }, "rate limiter unavailable; request allowed");
    return 0;
  }
}

/** Records one failure for `key` (never throws for a spent budget). */
export async function penalize(scope: RateLimitScope, key: string): Promise<void> {
  await limiter(scope)
    .penalty(key, 1)
    .catch((error: unknown) => logger().error({ err: error, scope }, "rate limiter unavailable"));
}

/** Forgets `key`'s counter in `scope`. */
export async function forgive(scope: RateLimitScope, key: string): Promise<void> {
  await limiter(scope)
    .delete(key)
    .catch((error: unknown) => logger().error({ err: error, scope }, "rate limiter unavailable"));
}
