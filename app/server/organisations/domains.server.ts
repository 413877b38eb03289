import type postgres from "postgres";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { systemTxtLookup, type TxtLookup } from "../platform/dns-txt.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { randomAlphanumeric, randomToken } from "../platform/ids.server.ts";
import { requireMembership, requirePermission } from "./organisations.server.ts";

// Verified domains (issue 49, decision 0212). An organisation's owner or admin claims a domain,
// publishes `agent-platform-verification=<token>` as a TXT record at `_agent-platform.<domain>`
// and asks us to look; once seen, the domain is the organisation's (one organisation holds a
// domain verified at a time) and it may require single sign-on for the people at it
// (sso-enforcement.server.ts).

export const TXT_PREFIX = "agent-platform-verification=";
export const RECORD_LABEL = "_agent-platform";

export interface OrganisationDomain {
  id: string;
  domain: string;
  /** Where and what to publish (a TXT record). */
  record: { name: string; type: "TXT"; value: string };
  verified: boolean;
  verifiedAt: string | null;
  requireSso: boolean;
  createdAt: string;
}

interface DomainRow {
  id: string;
  organisation_id: string;
  domain: string;
  token: string;
  created_at: Date;
  verified_at: Date | null;
  require_sso: boolean;
}

const toDomain = (r: DomainRow): OrganisationDomain => ({
  id: r.id,
  domain: r.domain,
  record: { name: `${RECORD_LABEL}.${r.domain}`, type: "TXT", value: `${TXT_PREFIX}${r.token}` },
  verified: r.verified_at !== null,
  verifiedAt: r.verified_at?.toISOString() ?? null,
  requireSso: r.require_sso,
  createdAt: r.created_at.toISOString(),
});

const NOT_FOUND = "Domain not found";
const CLAIMED = "This domain is verified by another organisation";

/** The organisation's domains (any member may see them). */
export async function listDomains(
  organisationId: string,
  personId: string,
): Promise<OrganisationDomain[]> {
  await requireMembership(organisationId, personId);
  const rows = await db()<DomainRow[]>`
    select * from organisation_domains where organisation_id = ${organisationId}
    order by created_at, id`;
  return rows.map(toDomain);
}

async function verifiedElsewhere(
  sql: postgres.Sql | postgres.TransactionSql,
  organisationId: string,
  domain: string,
): Promise<boolean> {
  const [row] = await sql`
    select 1 from organisation_domains
    where domain = ${domain} and verified_at is not null and organisation_id <> ${organisationId}`;
  return row !== undefined;
}

/** Claims a domain (unverified) and returns the TXT record to publish (members.manage). */
export async function addDomain(
  organisationId: string,
  personId: string,
  domain: string,
): Promise<OrganisationDomain> {
  return db().begin(async (t) => {
    await requirePermission(organisationId, personId, "members.manage", t);
    if (await verifiedElsewhere(t, organisationId, domain)) throw new DomainError(409, CLAIMED);
    const [row] = await t<DomainRow[]>`
      insert into organisation_domains (id, organisation_id, domain, token, created_by)
      values (${`dom_${randomAlphanumeric(20)}`}, ${organisationId}, ${domain},
              ${randomToken(24)}, ${personId})
      on conflict (organisation_id, domain) do nothing
      returning *`;
    if (!row) throw new DomainError(409, "This organisation has already added this domain");
    await recordAudit(
      { action: "domain.added", userId: organisationId, target: domain, details: { domain } },
      t,
    );
    return toDomain(row);
  });
}

async function ownDomain(
  t: postgres.TransactionSql,
  organisationId: string,
  domainId: string,
): Promise<DomainRow> {
  const [row] = await t<DomainRow[]>`
    select * from organisation_domains
    where id = ${domainId} and organisation_id = ${organisationId} for update`;
  if (!row) throw new DomainError(404, NOT_FOUND);
  return row;
}

/** Whether one of the TXT records is exactly the expected value (a record may come in chunks). */
const hasValue = (records: string[][], value: string) =>
  records.some((chunks) => chunks.join("").trim() === value);

/**
 * Looks up the domain's TXT record and marks it verified when it carries the token: 422 when it
 * does not (yet), 409 when another organisation holds the domain verified, 502 when DNS fails.
 */
export async function verifyDomain(
  organisationId: string,
  personId: string,
  domainId: string,
  lookup: TxtLookup = systemTxtLookup,
): Promise<OrganisationDomain> {
  const [claimed] = await db()<DomainRow[]>`
    select * from organisation_domains
    where id = ${domainId} and organisation_id = ${organisationId}`;
  await requirePermission(organisationId, personId, "members.manage", db());
  if (!claimed) throw new DomainError(404, NOT_FOUND);
  if (claimed.verified_at) return toDomain(claimed);
  const shown = toDomain(claimed).record;
  // The lookup runs outside any transaction: it may take seconds.
  let records: string[][];
  try {
    records = await lookup(shown.name);
  } catch (error) {
    throw new DomainError(
      502,
      `Could not look up ${shown.name}: ${(error as { code?: string }).code ?? "DNS error"}; try again`,
    );
  }
  if (!hasValue(records, shown.value)) {
    throw new DomainError(
      422,
      `No TXT record "${shown.value}" at ${shown.name} yet (found ${records.length} TXT record${records.length === 1 ? "" : "s"}); publish it and try again (DNS changes can take a while to appear)`,
    );
  }
  return db().begin(async (t) => {
    const row = await ownDomain(t, organisationId, domainId);
    if (row.verified_at) return toDomain(row);
    if (await verifiedElsewhere(t, organisationId, row.domain)) throw new DomainError(409, CLAIMED);
    let updated: DomainRow | undefined;
    try {
      [updated] = await t<DomainRow[]>`
        update organisation_domains set verified_at = now() where id = ${domainId} returning *`;
    } catch (error) {
      // Another organisation verified it between our check and our update.
      if ((error as { code?: string }).code === "23505") throw new DomainError(409, CLAIMED);
      throw error;
    }
    await recordAudit({ action: "domain.verified", userId: organisationId, target: row.domain }, t);
    return toDomain(updated!);
  });
}

/** Turns single-sign-on enforcement for a verified domain on or off (members.manage). */
export async function setRequireSso(
  organisationId: string,
  personId: string,
  domainId: string,
  requireSso: boolean,
): Promise<OrganisationDomain> {
  return db().begin(async (t) => {
    await requirePermission(organisationId, personId, "members.manage", t);
    const row = await ownDomain(t, organisationId, domainId);
    if (requireSso && !row.verified_at) {
      throw new DomainError(409, "Verify the domain before requiring single sign-on for it");
    }
    const [updated] = await t<DomainRow[]>`
      update organisation_domains set require_sso = ${requireSso} where id = ${domainId}
      returning *`;
    if (row.require_sso !== requireSso) {
      await recordAudit(
        {
          action: "domain.sso_changed",
          userId: organisationId,
          target: row.domain,
          details: { requireSso },
        },
        t,
      );
    }
    return toDomain(updated!);
  });
}

/** Removes a domain (and with it any enforcement of single sign-on for it). */
export async function removeDomain(
  organisationId: string,
  personId: string,
  domainId: string,
): Promise<void> {
  await db().begin(async (t) => {
    await requirePermission(organisationId, personId, "members.manage", t);
    const row = await ownDomain(t, organisationId, domainId);
    await t`delete from organisation_domains where id = ${domainId}`;
    await recordAudit({ action: "domain.removed", userId: organisationId, target: row.domain }, t);
  });
}

/** The domain part of an email address, lower-cased; undefined when it has none. */
export function emailDomain(email: string): string | undefined {
  const at = email.lastIndexOf("@");
  if (at < 1 || at === email.length - 1) return undefined;
  return email
    .slice(at + 1)
    .trim()
    .toLowerCase();
}

export interface DomainOwner {
  organisationId: string;
  organisationName: string;
  domain: string;
  requireSso: boolean;
}

/**
 * The organisation that holds the email's domain verified (exactly that domain: a subdomain is
 * a domain of its own), for "Sign in with SSO" and the sign-in enforcement; undefined if none.
 */
export async function organisationForEmailDomain(
  email: string,
  sql: postgres.Sql | postgres.TransactionSql = db(),
): Promise<DomainOwner | undefined> {
  const domain = emailDomain(email);
  if (!domain) return undefined;
  const [row] = await sql<
    { organisation_id: string; name: string; domain: string; require_sso: boolean }[]
  >`
    select d.organisation_id, o.name, d.domain, d.require_sso
    from organisation_domains d join users o on o.id = d.organisation_id
    where d.domain = ${domain} and d.verified_at is not null and o.kind = 'organisation'`;
  return (
    row && {
      organisationId: row.organisation_id,
      organisationName: row.name,
      domain: row.domain,
      requireSso: row.require_sso,
    }
  );
}

/** The organisation's verified domains (SCIM makes accounts only at these). */
export async function verifiedDomainsOf(
  organisationId: string,
  sql: postgres.Sql | postgres.TransactionSql = db(),
): Promise<string[]> {
  const rows = await sql<{ domain: string }[]>`
    select domain from organisation_domains
    where organisation_id = ${organisationId} and verified_at is not null`;
  return rows.map((r) => r.domain);
}
