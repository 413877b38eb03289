import type postgres from "postgres";
import { DomainError } from "../platform/errors.server.ts";

// An organisation keeps an owner (decision 0214): a person who is the only owner of one cannot
// delete their account until they transfer its ownership or delete it. A leaf module (platform
// only) because accounts/users.server.ts asks it inside the account's deletion.

export interface SoleOwned {
  id: string;
  name: string;
  /** Other members it has: 0 means transferring is impossible, only deleting it. */
  otherMembers: number;
}

/** The organisations `personId` is the only owner of (locks their memberships meanwhile). */
export async function soleOwnedOrganisations(
  t: postgres.TransactionSql,
  personId: string,
): Promise<SoleOwned[]> {
  // Locking the person's own owner rows makes a concurrent demotion of the other owner wait.
  const rows = await t<{ id: string; name: string; others: number }[]>`
    select o.id, o.name,
      (select count(*)::int from organisation_members x
        where x.organisation_id = o.id and x.user_id <> ${personId}) as others
    from organisation_members m join users o on o.id = m.organisation_id
    where m.user_id = ${personId} and m.role = 'owner'
      and not exists (
        select 1 from organisation_members x
        where x.organisation_id = m.organisation_id and x.role = 'owner'
          and x.user_id <> ${personId})
    order by o.created_at, o.id
    for update of m`;
  return rows.map((r) => ({ id: r.id, name: r.name, otherMembers: r.others }));
}

/** 409 naming each organisation and what to do about it. */
export function refuseSoleOwner(owned: readonly SoleOwned[]): DomainError {
  const named = owned
    .map((o) =>
      o.otherMembers > 0
        ? `"${o.name}" (${o.id}): transfer its ownership (POST /api/organizations/${o.id}/ownership) or delete it`
        : `"${o.name}" (${o.id}): delete it (DELETE /api/organizations/${o.id}) or invite someone to own it`,
    )
    .join("; ");
  return new DomainError(
    409,
    `You are the only owner of ${owned.length === 1 ? "an organisation" : `${owned.length} organisations`}; an organisation keeps an owner, so first deal with ${named}`,
  );
}
