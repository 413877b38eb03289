import { randomBytes } from "node:crypto";
import { sha256Hex } from "../platform/crypto.server.ts";
import { db } from "../platform/db.server.ts";

// Per-instance tokens: what a hosted gateway presents to the agents' model endpoint instead of
// any platform secret. The runtime issues one when it provisions an instance and writes it into
// the gateway's provider config; only its SHA-256 hash is stored (table ai_instance_tokens).

export const INSTANCE_TOKEN_PREFIX = "ait_";

export interface InstanceIdentity {
  userId: string;
  instanceId: string;
}

/** Creates a token for an instance; the only time the plain token exists. */
export async function issueInstanceToken(userId: string, instanceId: string): Promise<string> {
  const token = `${INSTANCE_TOKEN_PREFIX}${randomBytes(32).toString("base64url")}`;
  await db()`insert into ai_instance_tokens (token_hash, user_id, instance_id)
    values (${sha256Hex(token)}, ${userId}, ${instanceId})`;
  return token;
}

/** Revokes every token of an instance (deprovisioning, token rotation). */
export async function revokeInstanceTokens(instanceId: string): Promise<number> {
  const rows = await db()`update ai_instance_tokens set revoked_at = now()
    where instance_id = ${instanceId} and revoked_at is null returning 1`;
  return rows.length;
}

/** The instance a bearer token belongs to, or undefined when unknown or revoked. */
export async function authenticateInstanceToken(
  token: string,
): Promise<InstanceIdentity | undefined> {
  if (!token.startsWith(INSTANCE_TOKEN_PREFIX) || token.length > 200) return undefined;
  const [row] = await db()<{ user_id: string; instance_id: string }[]>`
    select user_id, instance_id from ai_instance_tokens
    where token_hash = ${sha256Hex(token)} and revoked_at is null`;
  return row ? { userId: row.user_id, instanceId: row.instance_id } : undefined;
}

export function bearerToken(request: Request): string | undefined {
  const header = request.headers.get("authorization") ?? "";
  const match = /^Bearer\s+(\S+)$/i.exec(header);
  return match?.[1];
}
