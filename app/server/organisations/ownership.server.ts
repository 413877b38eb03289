import { credentialCache } from "../accounts/credential-cache.server.ts";
import { LIVE_STATUSES } from "../billing/checkout.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { txExecutor } from "../platform/db-helpers.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import { requireMembership } from "./organisations.server.ts";
import type { Role } from "./roles.server.ts";
import { claimSeat, seatLimit, takesSeat } from "./seats.server.ts";

// Ownership (decision 0214): an owner hands the organisation to another member, or deletes it.
// These are what an only owner does before deleting their account or leaving.

async function requireOwner(
  t: Parameters<typeof requireMembership>[2],
  organisationId: string,
  personId: string,
  what: string,
) {
  const membership = await requireMembership(organisationId, personId, t);
  if (membership.role !== "owner") {
    throw new DomainError(403, `Only an owner can ${what} the organisation`);
  }
  return membership;
}

/**
 * Makes `toUserId` (a member) an owner and the caller an admin, in one step: the organisation
 * always has an owner. A viewer or billing manager made owner takes a seat (402 when none is
 * free).
 */
export async function transferOwnership(
  organisationId: string,
  personId: string,
  toUserId: string,
): Promise<void> {
  const seats = await seatLimit(organisationId);
  await db().begin(async (t) => {
    await requireOwner(t, organisationId, personId, "transfer");
    if (toUserId === personId) throw new DomainError(400, "userId: you already own it");
    const [target] = await t<{ role: Role }[]>`
      select role from organisation_members
      where organisation_id = ${organisationId} and user_id = ${toUserId} for update`;
    if (!target) {
      throw new DomainError(404, "Member not found: invite them first, then transfer");
    }
    if (!takesSeat(target.role)) await claimSeat(t, organisationId, seats, { countPending: true });
    await t`update organisation_members set role = 'owner'
      where organisation_id = ${organisationId} and user_id = ${toUserId}`;
    await t`update organisation_members set role = 'admin'
      where organisation_id = ${organisationId} and user_id = ${personId}`;
    await recordAudit(
      {
        action: "ownership.transferred",
        userId: organisationId,
        target: toUserId,
        details: { from: personId, previousRole: target.role },
      },
      t,
    );
  });
}

/**
 * Deletes the organisation and everything it owns (its rows go by cascade; its agents' teardown
 * is a job, as an account's deletion). Recorded in the deleting owner's audit log, since the
 * organisation's own log goes with it.
 */
export async function deleteOrganisation(organisationId: string, personId: string): Promise<void> {
  await db().begin(async (t) => {
    const { organisation } = await requireOwner(t, organisationId, personId, "delete");
    // Its subscription would go on billing an organisation that is gone (decision 0215).
    const [live] = await t<{ item: string }[]>`
      select item from subscriptions
      where user_id = ${organisationId} and status = any(${LIVE_STATUSES}) limit 1`;
    if (live) {
      throw new DomainError(
        409,
        `The organisation still has a live subscription (${live.item}): cancel it first (the customer portal on /billing)`,
      );
    }
    await t`delete from users where id = ${organisationId} and kind = 'organisation'`;
    await sendJob("teardown-instance", { userId: organisationId }, { db: txExecutor(t) });
    await recordAudit(
      {
        action: "organisation.deleted",
        userId: personId,
        target: organisationId,
        details: { name: organisation.name },
      },
      t,
    );
  });
  credentialCache()?.forgetUser(organisationId);
}
