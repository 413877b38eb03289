import type { CacheItem, CacheProvider } from "@node-saml/node-saml";
import { db } from "../platform/db.server.ts";

// What SAML sign-in remembers in PostgreSQL (so any web replica can take the answer): the
// AuthnRequest ids awaiting an answer (node-saml's InResponseTo cache), and the ids of the
// assertions accepted, until they expire, so the same assertion is never accepted twice.

/** How long an AuthnRequest may wait for its answer. */
export const REQUEST_TTL_MS = 10 * 60 * 1000;

/** node-saml's request-id cache for one organisation's connection. */
export function requestCache(organisationId: string): CacheProvider {
  return {
    async saveAsync(key: string, value: string): Promise<CacheItem | null> {
      const expires = new Date(Date.now() + REQUEST_TTL_MS);
      await db()`delete from saml_requests where expires_at < now()`;
      const rows = await db()`insert into saml_requests (id, organisation_id, expires_at)
        values (${key}, ${organisationId}, ${expires}) on conflict do nothing returning id`;
      return rows.length ? { value, createdAt: Date.now() } : null;
    },
    // node-saml reads the value as the request's time.
    async getAsync(key: string): Promise<string | null> {
      const [row] = await db()<{ created_at: Date }[]>`select created_at from saml_requests
        where id = ${key} and organisation_id = ${organisationId} and expires_at > now()`;
      return row ? row.created_at.toISOString() : null;
    },
    async removeAsync(key: string | null): Promise<string | null> {
      if (!key) return null;
      const [row] = await db()<{ id: string }[]>`delete from saml_requests
        where id = ${key} and organisation_id = ${organisationId} returning id`;
      return row ? row.id : null;
    },
  };
}

/**
 * Records a valid assertion's id until `expiresAt` (its NotOnOrAfter plus the clock skew, after
 * which the assertion is refused as expired anyway); false when it was seen already: a replay.
 */
export async function firstSighting(
  organisationId: string,
  assertionId: string,
  expiresAt: Date,
): Promise<boolean> {
  const sql = db();
  await sql`delete from saml_seen_assertions where expires_at < now()`;
  const rows =
    await sql`insert into saml_seen_assertions (organisation_id, assertion_id, expires_at)
    values (${organisationId}, ${assertionId}, ${expiresAt})
    on conflict do nothing returning assertion_id`;
  return rows.length === 1;
}
