import { requirePermission } from "../organisations/organisations.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { randomToken, sha256 } from "../platform/ids.server.ts";

// An organisation's SCIM bearer token (decision 0213): `scim_` + 32 random bytes, shown once,
// stored as its SHA-256 like an API key. One per organisation: creating one replaces (rotates)
// the old, which stops working at once. Made and revoked by owners and admins (members.manage).

export const SCIM_TOKEN_PREFIX = "scim_";
const LAST_USED_GRANULARITY_MS = 60_000;

export interface ScimTokenInfo {
  preview: string;
  createdAt: string;
  lastUsedAt: string | null;
}

interface TokenRow {
  token_preview: string;
  created_at: Date;
  last_used_at: Date | null;
}

const toInfo = (r: TokenRow): ScimTokenInfo => ({
  preview: r.token_preview,
  createdAt: r.created_at.toISOString(),
  lastUsedAt: r.last_used_at?.toISOString() ?? null,
});

export async function scimTokenInfo(organisationId: string): Promise<ScimTokenInfo | null> {
  const [row] = await db()<TokenRow[]>`
    select token_preview, created_at, last_used_at from scim_tokens
    where organisation_id = ${organisationId}`;
  return row ? toInfo(row) : null;
}

/** Makes (or rotates) the organisation's token; the token itself is in this answer only. */
export async function createScimToken(
  organisationId: string,
  personId: string,
): Promise<ScimTokenInfo & { token: string }> {
  const token = `${SCIM_TOKEN_PREFIX}${randomToken(32)}`;
  const preview = `${token.slice(0, SCIM_TOKEN_PREFIX.length + 4)}…${token.slice(-4)}`;
  return db().begin(async (t) => {
    await requirePermission(organisationId, personId, "members.manage", t);
    const [row] = await t<TokenRow[]>`
      insert into scim_tokens (organisation_id, token_hash, token_preview, created_by)
      values (${organisationId}, ${sha256(token)}, ${preview}, ${personId})
      on conflict (organisation_id) do update
        set token_hash = excluded.token_hash, token_preview = excluded.token_preview,
            created_by = excluded.created_by, created_at = now(), last_used_at = null
      returning token_preview, created_at, last_used_at`;
    await recordAudit(
      { action: "scim.token_created", userId: organisationId, details: { preview } },
      t,
    );
    return { ...toInfo(row!), token };
  });
}

export async function revokeScimToken(organisationId: string, personId: string): Promise<void> {
  await db().begin(async (t) => {
    await requirePermission(organisationId, personId, "members.manage", t);
    const gone = await t`delete from scim_tokens where organisation_id = ${organisationId}
      returning organisation_id`;
    if (gone.length > 0) {
      await recordAudit({ action: "scim.token_revoked", userId: organisationId }, t);
    }
  });
}

/** The organisation a presented token belongs to, or undefined (a suspended one has none). */
export async function resolveScimToken(token: string): Promise<string | undefined> {
  if (!token.startsWith(SCIM_TOKEN_PREFIX) || token.length > 200) return undefined;
  const sql = db();
  const [row] = await sql<{ organisation_id: string; last_used_at: Date | null }[]>`
    select t.organisation_id, t.last_used_at from scim_tokens t
    join users o on o.id = t.organisation_id
    where t.token_hash = ${sha256(token)} and o.suspended_at is null`;
  if (!row) return undefined;
  const last = row.last_used_at?.getTime() ?? 0;
  if (Date.now() - last > LAST_USED_GRANULARITY_MS) {
    await sql`update scim_tokens set last_used_at = now()
      where organisation_id = ${row.organisation_id}`;
  }
  return row.organisation_id;
}
