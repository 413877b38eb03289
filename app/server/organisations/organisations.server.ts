import type postgres from "postgres";
import { findUserByEmail } from "../accounts/users.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { newId } from "../platform/ids.server.ts";
import { allows, type Permission, type Role, refuseRole } from "./roles.server.ts";
import { claimSeat, seatLimit, takesSeat } from "./seats.server.ts";

// Organisations and their members (issue 48, decision 0203). An organisation is an owner like a
// person (a `users` row of kind 'organisation', migration 0106): whatever a person owns, an
// organisation owns the same way, and a member acts for it with a role (roles.server.ts).

export interface Organisation {
  id: string;
  name: string;
  createdAt: string;
}

export interface Membership {
  organisation: Organisation;
  role: Role;
}

export interface Member {
  userId: string;
  email: string;
  name: string;
  role: Role;
  addedAt: string;
}

interface MembershipRow {
  id: string;
  name: string;
  created_at: Date;
  role: Role;
}

const toOrganisation = (r: { id: string; name: string; created_at: Date }): Organisation => ({
  id: r.id,
  name: r.name,
  createdAt: r.created_at.toISOString(),
});

const NOT_FOUND = "Organisation not found";

/** Creates an organisation with `personId` as its owner. */
export async function createOrganisation(personId: string, name: string): Promise<Membership> {
  return db().begin(async (t) => {
    const [row] = await t<{ id: string; name: string; created_at: Date }[]>`
      insert into users (id, kind, name) values (${newId("org")}, 'organisation', ${name.trim()})
      returning id, name, created_at`;
    if (!row) throw new Error("organisation insert returned nothing");
    await t`insert into organisation_members (organisation_id, user_id, role, added_by)
      values (${row.id}, ${personId}, 'owner', ${personId})`;
    await recordAudit(
      { action: "organisation.created", userId: row.id, target: row.id, details: { name } },
      t,
    );
    return { organisation: toOrganisation(row), role: "owner" as const };
  });
}

/** The organisations `personId` is a member of, with the role in each. */
export async function listMemberships(personId: string): Promise<Membership[]> {
  const rows = await db()<MembershipRow[]>`
    select o.id, o.name, o.created_at, m.role
    from organisation_members m join users o on o.id = m.organisation_id
    where m.user_id = ${personId} and o.kind = 'organisation'
    order by o.created_at, o.id`;
  return rows.map((r) => ({ organisation: toOrganisation(r), role: r.role }));
}

/** `personId`'s membership of the organisation; undefined when none (or no such organisation). */
export async function membershipOf(
  organisationId: string,
  personId: string,
  sql: postgres.Sql | postgres.TransactionSql = db(),
): Promise<Membership | undefined> {
  const [row] = await sql<MembershipRow[]>`
    select o.id, o.name, o.created_at, m.role
    from organisation_members m join users o on o.id = m.organisation_id
    where m.organisation_id = ${organisationId} and m.user_id = ${personId}
      and o.kind = 'organisation'`;
  return row && { organisation: toOrganisation(row), role: row.role };
}

/** The membership, or 404 for a non-member (an organisation one is not in is not shown). */
export async function requireMembership(
  organisationId: string,
  personId: string,
  sql: postgres.Sql | postgres.TransactionSql = db(),
): Promise<Membership> {
  const membership = await membershipOf(organisationId, personId, sql);
  if (!membership) throw new DomainError(404, NOT_FOUND);
  return membership;
}

/** The membership of a person whose role allows `permission`: 404 for a non-member, else 403. */
export async function requirePermission(
  organisationId: string,
  personId: string,
  permission: Permission,
  sql: postgres.Sql | postgres.TransactionSql,
): Promise<Membership> {
  const membership = await requireMembership(organisationId, personId, sql);
  if (!allows(membership.role, permission)) throw refuseRole(membership.role, permission);
  return membership;
}

export async function listMembers(organisationId: string, personId: string): Promise<Member[]> {
  await requireMembership(organisationId, personId);
  const rows = await db()<
    { user_id: string; email: string; name: string; role: Role; created_at: Date }[]
  >`
    select m.user_id, u.email, u.name, m.role, m.created_at
    from organisation_members m join users u on u.id = m.user_id
    where m.organisation_id = ${organisationId}
    order by m.created_at, m.user_id`;
  return rows.map((r) => ({
    userId: r.user_id,
    email: r.email,
    name: r.name,
    role: r.role,
    addedAt: r.created_at.toISOString(),
  }));
}

/** Only an owner gives or takes the owner role. */
export function checkOwnerRule(actor: Role, from: Role | undefined, to: Role | undefined): void {
  if ((from === "owner" || to === "owner") && actor !== "owner") {
    throw new DomainError(403, "Only an owner can make or unmake an owner");
  }
}

/** An organisation keeps at least one owner. */
async function keepAnOwner(t: postgres.TransactionSql, organisationId: string, userId: string) {
  const [other] = await t`
    select 1 from organisation_members
    where organisation_id = ${organisationId} and role = 'owner' and user_id <> ${userId}
    limit 1`;
  if (!other) {
    throw new DomainError(
      409,
      `An organisation keeps at least one owner: transfer its ownership first (POST /api/organizations/${organisationId}/ownership) or delete it`,
    );
  }
}

/**
 * Revokes the open invitations of `email` to the organisation (a direct add or a new invitation
 * settles them: one way in per address at a time, decision 0204).
 */
export async function revokeOpenInvitations(
  t: postgres.TransactionSql,
  organisationId: string,
  email: string,
): Promise<void> {
  await t`update organisation_invitations set revoked_at = now()
    where organisation_id = ${organisationId} and lower(email) = lower(${email})
      and accepted_at is null and revoked_at is null`;
}

/**
 * Adds an existing account (by email) as a member at once, under the rules an invitation
 * follows: members.manage, only an owner adds an owner, a seat for a role that takes one (402
 * over the limit). An open invitation of the same address is revoked.
 */
export async function addMember(
  organisationId: string,
  personId: string,
  input: { email: string; role: Role },
): Promise<Member> {
  const seats = takesSeat(input.role) ? await seatLimit(organisationId) : undefined;
  return db().begin(async (t) => {
    const actor = await requirePermission(organisationId, personId, "members.manage", t);
    checkOwnerRule(actor.role, undefined, input.role);
    const person = await findUserByEmail(input.email, t);
    if (!person) {
      throw new DomainError(
        404,
        "No account has this email: invite it instead (POST /api/organizations/:id/invitations)",
      );
    }
    if (await membershipOf(organisationId, person.id, t)) {
      throw new DomainError(409, "Already a member of this organisation");
    }
    await revokeOpenInvitations(t, organisationId, person.email);
    if (seats) await claimSeat(t, organisationId, seats, { countPending: true });
    const [row] = await t<{ created_at: Date }[]>`
      insert into organisation_members (organisation_id, user_id, role, added_by)
      values (${organisationId}, ${person.id}, ${input.role}, ${personId})
      on conflict do nothing returning created_at`;
    if (!row) throw new DomainError(409, "Already a member of this organisation");
    await recordAudit(
      {
        action: "member.added",
        userId: organisationId,
        target: person.id,
        details: { role: input.role },
      },
      t,
    );
    return {
      userId: person.id,
      email: person.email,
      name: person.name,
      role: input.role,
      addedAt: row.created_at.toISOString(),
    };
  });
}

export async function changeRole(
  organisationId: string,
  personId: string,
  userId: string,
  role: Role,
): Promise<void> {
  const seats = takesSeat(role) ? await seatLimit(organisationId) : undefined;
  await db().begin(async (t) => {
    const actor = await requirePermission(organisationId, personId, "members.manage", t);
    const [current] = await t<{ role: Role }[]>`
      select role from organisation_members
      where organisation_id = ${organisationId} and user_id = ${userId} for update`;
    if (!current) throw new DomainError(404, "Member not found");
    checkOwnerRule(actor.role, current.role, role);
    if (current.role === "owner" && role !== "owner") {
      await keepAnOwner(t, organisationId, userId);
    }
    // A viewer or billing manager made a member (or admin, owner) takes a seat now.
    if (seats && !takesSeat(current.role)) {
      await claimSeat(t, organisationId, seats, { countPending: true });
    }
    await t`update organisation_members set role = ${role}
      where organisation_id = ${organisationId} and user_id = ${userId}`;
    await recordAudit(
      {
        action: "member.role_changed",
        userId: organisationId,
        target: userId,
        details: { from: current.role, to: role },
      },
      t,
    );
  });
}

/**
 * Removes a member: their access through the organisation ends at once (the membership's
 * NOTIFY closes their open sockets and streams, migration 0106).
 */
export async function removeMember(
  organisationId: string,
  personId: string,
  userId: string,
): Promise<void> {
  await db().begin(async (t) => {
    const actor = await requirePermission(organisationId, personId, "members.manage", t);
    const [current] = await t<{ role: Role }[]>`
      select role from organisation_members
      where organisation_id = ${organisationId} and user_id = ${userId} for update`;
    if (!current) throw new DomainError(404, "Member not found");
    checkOwnerRule(actor.role, current.role, undefined);
    if (current.role === "owner") await keepAnOwner(t, organisationId, userId);
    await t`delete from organisation_members
      where organisation_id = ${organisationId} and user_id = ${userId}`;
    await recordAudit(
      {
        action: "member.removed",
        userId: organisationId,
        target: userId,
        details: { role: current.role },
      },
      t,
    );
  });
}
