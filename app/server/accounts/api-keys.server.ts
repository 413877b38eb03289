import { randomBytes } from "node:crypto";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { newId, sha256, sha256Hex } from "../platform/ids.server.ts";
import { credentialCache } from "./credential-cache.server.ts";
import { toUser, type User, type UserRow } from "./model.server.ts";

// API keys: `sk_` + 32 random bytes (base64url), shown once, stored as SHA-256. `lastUsed` is
// written at most once a minute per key, so authenticating with a key is one read per request.
// docs/decisions/0012-api-keys.md

export const KEY_PREFIX = "sk_";
const LAST_USED_GRANULARITY_MS = 60 * 1000;

export interface ApiKeyInfo {
  id: string;
  name: string;
  keyPreview: string;
  createdAt: string;
  lastUsed: string | null;
}

interface KeyRow {
  id: string;
  name: string;
  key_preview: string;
  created_at: Date;
  last_used_at: Date | null;
}

const toInfo = (r: KeyRow): ApiKeyInfo => ({
  id: r.id,
  name: r.name,
  keyPreview: r.key_preview,
  createdAt: r.created_at.toISOString(),
  lastUsed: r.last_used_at?.toISOString() ?? null,
});

export const previewOf = (key: string) => `${key.slice(0, KEY_PREFIX.length + 4)}…${key.slice(-4)}`;

export async function createApiKey(userId: string, name: string) {
  const key = `${KEY_PREFIX}${randomBytes(32).toString("base64url")}`;
  const [row] = await db()<KeyRow[]>`
    insert into api_keys (id, user_id, name, key_hash, key_preview)
    values (${newId("key")}, ${userId}, ${name}, ${sha256(key)}, ${previewOf(key)})
    returning id, name, key_preview, created_at, last_used_at`;
  await recordAudit({ action: "api_key.created", userId, target: row!.id, details: { name } });
  return { id: row!.id, name: row!.name, key, createdAt: row!.created_at.toISOString() };
}

export async function listApiKeys(userId: string): Promise<ApiKeyInfo[]> {
  const rows = await db()<KeyRow[]>`
    select id, name, key_preview, created_at, last_used_at from api_keys
    where user_id = ${userId} order by created_at desc, id`;
  return rows.map(toInfo);
}

/** The user's key; another user's key (or none) is 404 alike. */
export async function getApiKey(userId: string, id: string): Promise<ApiKeyInfo> {
  const [row] = await db()<KeyRow[]>`
    select id, name, key_preview, created_at, last_used_at from api_keys
    where id = ${id} and user_id = ${userId}`;
  if (!row) throw new DomainError(404, "API key not found");
  return toInfo(row);
}

export async function deleteApiKey(userId: string, id: string): Promise<void> {
  const rows =
    await db()`delete from api_keys where id = ${id} and user_id = ${userId} returning id`;
  if (rows.length === 0) throw new DomainError(404, "API key not found");
  // Other replicas hear it from the trigger's NOTIFY; this one refuses it from now on.
  credentialCache()?.forgetKey(id);
  await recordAudit({ action: "api_key.deleted", userId, target: id });
}

/**
 * The owner of a presented key, or undefined. Touches last_used_at at most once a minute. A key
 * seen before is answered from the credential cache (no database read) while it is valid.
 */
export async function resolveApiKey(
  key: string,
): Promise<{ keyId: string; user: User } | undefined> {
  if (!key.startsWith(KEY_PREFIX) || key.length > 200) return undefined;
  const cache = credentialCache();
  const hex = sha256Hex(key);
  const hit = cache?.key(hex);
  const sql = db();
  if (hit) {
    if (hit.lastUsedAt === null || Date.now() - hit.lastUsedAt > LAST_USED_GRANULARITY_MS) {
      hit.lastUsedAt = Date.now();
      await sql`update api_keys set last_used_at = now() where id = ${hit.keyId}`;
    }
    return { keyId: hit.keyId, user: hit.user };
  }
  const epoch = cache?.epoch() ?? 0;
  const [row] = await sql<(UserRow & { key_id: string; last_used_at: Date | null })[]>`
    select u.*, k.id as key_id, k.last_used_at,
      (select pa.plan from plan_assignments pa where pa.user_id = u.id) as assigned_plan
    from api_keys k join users u on u.id = k.user_id
    where k.key_hash = ${Buffer.from(hex, "hex")} and u.suspended_at is null`;
  if (!row) return undefined;
  let lastUsedAt = row.last_used_at?.getTime() ?? null;
  if (lastUsedAt === null || Date.now() - lastUsedAt > LAST_USED_GRANULARITY_MS) {
    await sql`update api_keys set last_used_at = now() where id = ${row.key_id}`;
    lastUsedAt = Date.now();
  }
  const user = toUser(row);
  // Not kept when anything was invalidated since the read began (its row may be stale); the
  // touch's own NOTIFY may be such a thing: then the next request reads and keeps it.
  cache?.putKey(hex, { keyId: row.key_id, user, lastUsedAt }, epoch);
  return { keyId: row.key_id, user };
}
