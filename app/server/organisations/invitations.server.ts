import type postgres from "postgres";
import type { User } from "../accounts/model.server.ts";
import { createUser, getUser, type NewUser } from "../accounts/users.server.ts";
import { type AuditActor, recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { txExecutor } from "../platform/db-helpers.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { newId, randomToken, sha256 } from "../platform/ids.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import { activeBranding } from "./branding.server.ts";
import { invitationMail } from "./invitation-mail.server.ts";
import {
  checkOwnerRule,
  type Membership,
  requirePermission,
  revokeOpenInvitations,
} from "./organisations.server.ts";
import type { Role } from "./roles.server.ts";
import { claimSeat, type SeatLimit, seatLimit, takesSeat } from "./seats.server.ts";

// Invitations by email (issue 48, decision 0204): a random 256-bit token, kept as its SHA-256,
// mailed through the send-email job as <APP_URL>/invitations/<token>; used once, revocable,
// expiring after INVITATION_LIFETIME_DAYS. Accepted by the signed-in person whose email is the
// invited one, or by registering that email with the token. A role that takes a seat holds one
// while the invitation is open (seats.server.ts).

export const INVITATION_LIFETIME_DAYS = 7;

export interface Invitation {
  id: string;
  email: string;
  role: Role;
  invitedBy: string | null;
  createdAt: string;
  expiresAt: string;
}

/** What the token's holder sees of an invitation (the page at /invitations/<token>). */
export interface InvitationPreview {
  organisation: { id: string; name: string };
  email: string;
  role: Role;
  expiresAt: string;
  state: "pending" | "accepted" | "revoked" | "expired";
}

interface InvitationRow {
  id: string;
  organisation_id: string;
  email: string;
  role: Role;
  invited_by: string | null;
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
  revoked_at: Date | null;
}

const toInvitation = (r: InvitationRow): Invitation => ({
  id: r.id,
  email: r.email,
  role: r.role,
  invitedBy: r.invited_by,
  createdAt: r.created_at.toISOString(),
  expiresAt: r.expires_at.toISOString(),
});

const NOT_FOUND = "Invitation not found";

/**
 * Invites `email` into the organisation with `role`: members.manage, only an owner invites an
 * owner, 409 when the address is already a member's, 402 over the seat limit for a role that
 * takes a seat. Inviting an address again replaces its open invitation (a new link; the old one
 * stops working). The mail goes out when the transaction commits.
 */
export async function inviteMember(
  organisationId: string,
  personId: string,
  input: { email: string; role: Role },
): Promise<Invitation> {
  const email = input.email.trim();
  const seats = takesSeat(input.role) ? await seatLimit(organisationId) : undefined;
  // Read before the transaction, as the seats are (the plan's reads use their own connections).
  const branding = await activeBranding(organisationId);
  return db().begin(async (t) => {
    const actor = await requirePermission(organisationId, personId, "members.manage", t);
    checkOwnerRule(actor.role, undefined, input.role);
    const [member] = await t`
      select 1 from organisation_members m join users u on u.id = m.user_id
      where m.organisation_id = ${organisationId} and lower(u.email) = lower(${email})`;
    if (member) throw new DomainError(409, "Already a member of this organisation");
    await revokeOpenInvitations(t, organisationId, email);
    if (seats) await claimSeat(t, organisationId, seats, { countPending: true });
    const token = randomToken(32);
    const [row] = await t<InvitationRow[]>`
      insert into organisation_invitations
        (id, organisation_id, email, role, token_hash, invited_by, expires_at)
      values (${newId("inv")}, ${organisationId}, ${email}, ${input.role}, ${sha256(token)},
              ${personId}, now() + make_interval(days => ${INVITATION_LIFETIME_DAYS}))
      returning *`;
    if (!row) throw new Error("invitation insert returned nothing");
    const inviter = await getUser(personId, t);
    await sendJob(
      "send-email",
      invitationMail({
        to: email,
        organisationName: actor.organisation.name,
        inviterName: inviter?.name ?? "A member",
        role: input.role,
        token,
        expiresAt: row.expires_at,
        branding,
      }),
      { db: txExecutor(t) },
    );
    await recordAudit(
      {
        action: "invitation.sent",
        userId: organisationId,
        target: row.id,
        details: { email, role: input.role },
      },
      t,
    );
    return toInvitation(row);
  });
}

/** The organisation's open invitations, expired ones included until revoked (members.manage). */
export async function listInvitations(
  organisationId: string,
  personId: string,
): Promise<Array<Invitation & { expired: boolean }>> {
  await requirePermission(organisationId, personId, "members.manage", db());
  const rows = await db()<(InvitationRow & { expired: boolean })[]>`
    select *, expires_at <= now() as expired from organisation_invitations
    where organisation_id = ${organisationId} and accepted_at is null and revoked_at is null
    order by created_at, id`;
  return rows.map((r) => ({ ...toInvitation(r), expired: r.expired }));
}

/** Revokes an open invitation (members.manage; only an owner revokes an owner's). */
export async function revokeInvitation(
  organisationId: string,
  personId: string,
  invitationId: string,
): Promise<void> {
  await db().begin(async (t) => {
    const actor = await requirePermission(organisationId, personId, "members.manage", t);
    const [row] = await t<InvitationRow[]>`
      select * from organisation_invitations
      where id = ${invitationId} and organisation_id = ${organisationId} for update`;
    if (!row) throw new DomainError(404, NOT_FOUND);
    checkOwnerRule(actor.role, row.role, undefined);
    if (row.accepted_at) throw new DomainError(409, "This invitation was already accepted");
    if (row.revoked_at) throw new DomainError(409, "This invitation was already revoked");
    await t`update organisation_invitations set revoked_at = now() where id = ${row.id}`;
    await recordAudit(
      {
        action: "invitation.revoked",
        userId: organisationId,
        target: row.id,
        details: { email: row.email, role: row.role },
      },
      t,
    );
  });
}

/** The invitation a token names, locked for the transaction; 404 when none. */
async function lockedByToken(t: postgres.TransactionSql, token: string) {
  const [row] = await t<(InvitationRow & { expired: boolean })[]>`
    select *, expires_at <= now() as expired from organisation_invitations
    where token_hash = ${sha256(token)} for update`;
  if (!row) throw new DomainError(404, NOT_FOUND);
  return row;
}

/** 410 for an invitation that can no longer be used: used, revoked or expired. */
function assertUsable(row: InvitationRow & { expired: boolean }): void {
  if (row.accepted_at) throw new DomainError(410, "This invitation was already used");
  if (row.revoked_at) throw new DomainError(410, "This invitation was revoked");
  if (row.expired) {
    throw new DomainError(410, "This invitation expired: ask the organisation for a new one");
  }
}

/** A forwarded link does not let someone else in: the email must be the invited one. */
function assertInvitee(row: InvitationRow, email: string, how: string): void {
  if (row.email.toLowerCase() !== email.trim().toLowerCase()) {
    throw new DomainError(
      403,
      `This invitation was sent to another email address: ${how} with the address it was sent to`,
    );
  }
}

/** The seat limit of the organisation a token invites into, when its role takes a seat. */
async function seatsFor(token: string): Promise<SeatLimit | undefined> {
  const [row] = await db()<{ organisation_id: string; role: Role }[]>`
    select organisation_id, role from organisation_invitations where token_hash = ${sha256(token)}`;
  return row && takesSeat(row.role) ? seatLimit(row.organisation_id) : undefined;
}

/** Makes the invitee a member and uses the invitation up, in `t`. */
async function join(
  t: postgres.TransactionSql,
  row: InvitationRow,
  personId: string,
  seats: SeatLimit | undefined,
): Promise<Membership> {
  // Its own invitation held the seat: members alone count against the limit now.
  if (seats) await claimSeat(t, row.organisation_id, seats, { countPending: false });
  await t`insert into organisation_members (organisation_id, user_id, role, added_by)
    values (${row.organisation_id}, ${personId}, ${row.role}, ${row.invited_by})`;
  await t`update organisation_invitations set accepted_at = now(), accepted_by = ${personId}
    where id = ${row.id}`;
  const actor: AuditActor = { type: "user", id: personId, userId: personId };
  await recordAudit(
    {
      action: "invitation.accepted",
      actor,
      userId: row.organisation_id,
      target: personId,
      details: { invitation: row.id, role: row.role },
    },
    t,
  );
  const [organisation] = await t<{ id: string; name: string; created_at: Date }[]>`
    select id, name, created_at from users where id = ${row.organisation_id}`;
  return {
    organisation: {
      id: row.organisation_id,
      name: organisation?.name ?? "",
      createdAt: organisation?.created_at.toISOString() ?? new Date(0).toISOString(),
    },
    role: row.role,
  };
}

/**
 * Accepts an invitation as the signed-in `person`: 404 for an unknown token, 410 when used,
 * revoked or expired, 403 when the person's email is not the invited one, 409 when already a
 * member (the invitation is then used up), 402 when the organisation's seats are all taken.
 */
export async function acceptInvitation(token: string, person: User): Promise<Membership> {
  const seats = await seatsFor(token);
  const outcome = await db().begin(async (t) => {
    const row = await lockedByToken(t, token);
    assertUsable(row);
    assertInvitee(row, person.email, "sign in");
    const [member] = await t`select 1 from organisation_members
      where organisation_id = ${row.organisation_id} and user_id = ${person.id}`;
    if (member) {
      await t`update organisation_invitations set accepted_at = now(), accepted_by = ${person.id}
        where id = ${row.id}`;
      return undefined;
    }
    return join(t, row, person.id, seats);
  });
  if (!outcome) throw new DomainError(409, "Already a member of this organisation");
  return outcome;
}

/**
 * Registers a new account from an invitation and makes it a member at once: the invitation's
 * checks, then the account (its email proven, as the link came through its mailbox), in one
 * transaction, so a refused invitation makes no account.
 */
export async function registerWithInvitation(
  input: NewUser,
  token: string,
): Promise<{ user: User; membership: Membership }> {
  const seats = await seatsFor(token);
  return db().begin(async (t) => {
    const row = await lockedByToken(t, token);
    assertUsable(row);
    assertInvitee(row, input.email, "register");
    const user = await createUser({ ...input, emailVerified: true }, t);
    return { user, membership: await join(t, row, user.id, seats) };
  }) as Promise<{ user: User; membership: Membership }>;
}

/** What the page at /invitations/<token> shows; undefined for an unknown token. */
export async function invitationPreview(token: string): Promise<InvitationPreview | undefined> {
  const [row] = await db()<(InvitationRow & { expired: boolean; organisation_name: string })[]>`
    select i.*, i.expires_at <= now() as expired, o.name as organisation_name
    from organisation_invitations i join users o on o.id = i.organisation_id
    where i.token_hash = ${sha256(token)}`;
  if (!row) return undefined;
  return {
    organisation: { id: row.organisation_id, name: row.organisation_name },
    email: row.email,
    role: row.role,
    expiresAt: row.expires_at.toISOString(),
    state: row.accepted_at
      ? "accepted"
      : row.revoked_at
        ? "revoked"
        : row.expired
          ? "expired"
          : "pending",
  };
}
