import { randomBytes } from "node:crypto";
import { sha256Hex } from "../platform/crypto.server.ts";
import { db } from "../platform/db.server.ts";

// Per-instance tokens: what a hosted gateway presents to the agents' model endpoint instead of
// any platform secret. The runtime issues one when it provisions an instance and writes it into
// the gateway's provider config; only its SHA-256 hash is stored (table ai_instance_tokens).

export const INSTANCE_TOKEN_PREFIX = "ait_";

export interface InstanceIdentity {
  warmup?: false;
  userId: string;
  instanceId: string;
  /** The owner's BYOK keys, sealed (read in the same query to save a round trip). */
  sealedKeys: Array<{ provider: string; sealed: string }>;
}

/**
 * A pooled gateway's warm-up token (decision 0038): it belongs to no user; the agents' endpoint
 * answers it with a fixed minimal completion, no provider and nothing metered.
 */
export interface WarmupIdentity {
  warmup: true;
  poolId: string;
}

export type TokenIdentity = InstanceIdentity | WarmupIdentity;

/** Creates a token for an instance; the only time the plain token exists. */
export async function issueInstanceToken(userId: string, instanceId: string): Promise<string> {
  const token = `${INSTANCE_TOKEN_PREFIX}${randomBytes(32).toString("base64url")}`;
  await db()`insert into ai_instance_tokens (token_hash, user_id, instance_id)
    values (${sha256Hex(token)}, ${userId}, ${instanceId})`;
  return token;
}

/** Creates a warm-up token for a pooled gateway (`gwp_…`); revoked when it is claimed. */
export async function issueWarmupToken(poolId: string): Promise<string> {
  const token = `${INSTANCE_TOKEN_PREFIX}${randomBytes(32).toString("base64url")}`;
  await db()`insert into ai_instance_tokens (token_hash, user_id, instance_id, warmup)
    values (${sha256Hex(token)}, ${null}, ${poolId}, true)`;
  return token;
}

/**
 * At adoption, the pooled gateway's warm-up token becomes the tenant instance's token (decision
 * 0038): the gateway keeps the provider key it warmed up with, so adoption needs no config
 * reload. The instance's older tokens are revoked. False when the pool id has no live warm-up
 * token (the caller then issues a fresh token and patches it in).
 */
export async function handOverWarmupToken(
  poolId: string,
  userId: string,
  instanceId: string,
): Promise<boolean> {
  return db().begin(async (sql) => {
    await sql`update ai_instance_tokens set revoked_at = now()
      where instance_id = ${instanceId} and revoked_at is null`;
    const rows = await sql`update ai_instance_tokens
      set user_id = ${userId}, instance_id = ${instanceId}, warmup = false
      where instance_id = ${poolId} and warmup and revoked_at is null
      returning 1`;
    clearCache();
    return rows.length === 1;
  });
}

/** Revokes every token of an instance (or of a pooled gateway, by its pool id) (deprovisioning, token rotation). */
export async function revokeInstanceTokens(
  instanceId: string,
  /** A token of the instance to keep (the one that replaced the others). */
  except?: string,
): Promise<number> {
  const kept = except === undefined ? "" : sha256Hex(except);
  const rows = await db()`update ai_instance_tokens set revoked_at = now()
    where instance_id = ${instanceId} and revoked_at is null and token_hash <> ${kept}
    returning 1`;
  clearCache(); // this process at once; others within CACHE_MS
  return rows.length;
}

/** Revokes one token (one issued for a change that did not happen). */
export async function revokeInstanceToken(token: string): Promise<void> {
  await db()`update ai_instance_tokens set revoked_at = now()
    where token_hash = ${sha256Hex(token)} and revoked_at is null`;
  clearCache();
}

// Gateways call many times a second: a token's identity is remembered for a few seconds, so a
// revocation (or a BYOK key change) takes effect within CACHE_MS on every web process.
const CACHE_MS = 5_000;
const CACHE_MAX = 10_000;
const cache = new Map<string, { at: number; identity: TokenIdentity | undefined }>();
/** Bumped whenever the cache is cleared, so a lookup in flight does not re-add what was revoked. */
let cacheGeneration = 0;

function clearCache(): void {
  cache.clear();
  refreshing.clear();
  cacheGeneration += 1;
}

export function resetInstanceTokenCache(): void {
  clearCache();
}

/** The instance (or pooled gateway) a bearer token belongs to; undefined: unknown or revoked. */
export async function authenticateInstanceToken(token: string): Promise<TokenIdentity | undefined> {
  if (!token.startsWith(INSTANCE_TOKEN_PREFIX) || token.length > 200) return undefined;
  const hash = sha256Hex(token);
  const hit = cache.get(hash);
  if (hit) {
    const age = Date.now() - hit.at;
    if (age < CACHE_MS) {
      // Past half its life the entry is re-read in the background, so a busy gateway's calls
      // never wait on the lookup (a stream p99 tail); the bound stays CACHE_MS, since an entry
      // is only served while younger than that. docs/decisions/0086
      if (age >= CACHE_MS / 2) void refresh(hash);
      return hit.identity;
    }
  }
  return refresh(hash);
}

const refreshing = new Map<string, Promise<TokenIdentity | undefined>>();

/** One lookup per token at a time; the result (but never a warm-up identity) is cached. */
function refresh(hash: string): Promise<TokenIdentity | undefined> {
  const inFlight = refreshing.get(hash);
  if (inFlight) return inFlight;
  const startedAt = Date.now();
  const generation = cacheGeneration;
  const pending: Promise<TokenIdentity | undefined> = lookup(hash)
    .then((identity) => {
      // Warm-up identities are never cached: at adoption the token turns into the tenant's, and
      // the tenant's first call must not get a warm-up answer from another process's cache.
      // Nor is a read that started before an in-process revocation cleared the cache.
      if (identity?.warmup || generation !== cacheGeneration) return identity;
      if (cache.size >= CACHE_MAX) cache.clear();
      // Aged from when the read started: the row was as seen at or after that moment.
      cache.set(hash, { at: startedAt, identity });
      return identity;
    })
    .finally(() => {
      if (refreshing.get(hash) === pending) refreshing.delete(hash);
    });
  refreshing.set(hash, pending);
  return pending;
}

async function lookup(hash: string): Promise<TokenIdentity | undefined> {
  const [row] = await db()<
    {
      user_id: string | null;
      instance_id: string;
      keys: Array<{ provider: string; sealed: string }>;
    }[]
  >`select t.user_id, t.instance_id,
      coalesce((select json_agg(json_build_object('provider', k.provider, 'sealed', k.sealed_key))
        from ai_user_keys k where k.user_id = t.user_id), '[]'::json) as keys
    from ai_instance_tokens t
    where t.token_hash = ${hash} and t.revoked_at is null
      -- A suspended account's gateways spend nothing more (decision 0104).
      and not exists (
        select 1 from users u where u.id = t.user_id and u.suspended_at is not null)`;
  if (!row) return undefined;
  if (row.user_id === null) return { warmup: true, poolId: row.instance_id };
  return { userId: row.user_id, instanceId: row.instance_id, sealedKeys: row.keys };
}

export function bearerToken(request: Request): string | undefined {
  const header = request.headers.get("authorization") ?? "";
  const match = /^Bearer\s+(\S+)$/i.exec(header);
  return match?.[1];
}
