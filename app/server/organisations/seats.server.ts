import type postgres from "postgres";
import { planLimits } from "../billing/catalog.server.ts";
import { selfHosted } from "../billing/plan-assignments.server.ts";
import { paidSeats } from "../billing/seat-purchase.server.ts";
import { effectivePlan } from "../billing/subscriptions.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { allows, ROLES, type Role } from "./roles.server.ts";

// Seats (issue 48, decision 0204): a seat is a member who may use the organisation's agents,
// that is a role that may chat with them (owner, admin, member; viewers and billing managers
// take none). An organisation has one seat, plus its plan's extra gateway seats (the catalog's
// `gatewaySeats`, read from its effective plan as a person's is; null: unlimited), plus the
// seats an operator gives it (`organisation_seat_grants`, self-hosted mode's /ops).

export const takesSeat = (role: Role): boolean => allows(role, "agents.chat");
export const SEAT_ROLES: readonly Role[] = ROLES.filter(takesSeat);

export interface SeatLimit {
  /** The organisation's effective plan id (`free` without one). */
  plan: string;
  /** Seats the plan gives: one, plus its extra gateway seats; null means unlimited. */
  fromPlan: number | null;
  /** Seats an operator gave on top. */
  extra: number;
  /** Seats bought through the payment processor on top (decision 0215). */
  paid: number;
  /** All the seats it has; null means unlimited. */
  limit: number | null;
}

export interface Seats extends SeatLimit {
  /** Members whose role takes a seat. */
  used: number;
  /** Open, unexpired invitations for a role that takes a seat (each holds one). */
  pending: number;
}

const SEAT_ROLE_LIST = SEAT_ROLES as unknown as string[];

async function extraSeats(organisationId: string, sql: postgres.Sql | postgres.TransactionSql) {
  const [row] = await sql<{ extra_seats: number }[]>`
    select extra_seats from organisation_seat_grants where organisation_id = ${organisationId}`;
  return row?.extra_seats ?? 0;
}

/**
 * The organisation's seats. Read before a transaction that claims one (the plan's reads use
 * their own connections; holding the seat lock meanwhile could starve the pool).
 */
export async function seatLimit(organisationId: string): Promise<SeatLimit> {
  const [{ plan }, extra, paid] = await Promise.all([
    effectivePlan(organisationId),
    extraSeats(organisationId, db()),
    paidSeats(organisationId),
  ]);
  const planExtra = planLimits(plan).gatewaySeats;
  const fromPlan = planExtra === null ? null : 1 + planExtra;
  return { plan, fromPlan, extra, paid, limit: fromPlan === null ? null : fromPlan + extra + paid };
}

async function seatsTaken(
  organisationId: string,
  sql: postgres.Sql | postgres.TransactionSql,
): Promise<{ used: number; pending: number }> {
  const [row] = await sql<{ used: number; pending: number }[]>`
    select
      (select count(*)::int from organisation_members
        where organisation_id = ${organisationId} and role = any(${SEAT_ROLE_LIST})) as used,
      (select count(*)::int from organisation_invitations
        where organisation_id = ${organisationId} and role = any(${SEAT_ROLE_LIST})
          and accepted_at is null and revoked_at is null and expires_at > now()) as pending`;
  return row ?? { used: 0, pending: 0 };
}

/** The organisation's seats and how many are taken (any member may see them). */
export async function seatsOf(organisationId: string): Promise<Seats> {
  const [limit, taken] = await Promise.all([
    seatLimit(organisationId),
    seatsTaken(organisationId, db()),
  ]);
  return { ...limit, ...taken };
}

const count = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

function refusal(limit: SeatLimit & { limit: number }, used: number, pending: number) {
  const planPart =
    limit.plan === "free"
      ? "it has no plan, which gives 1"
      : `its ${limit.plan} plan gives ${limit.fromPlan}`;
  const extraPart =
    (limit.extra > 0 ? `, plus ${limit.extra} given by the operator` : "") +
    (limit.paid > 0 ? `, plus ${limit.paid} bought` : "");
  const usedPart = count(used, "member uses one", "members use one");
  const heldPart =
    pending > 0
      ? ` and ${count(pending, "pending invitation holds", "pending invitations hold")} one`
      : "";
  const more = selfHosted()
    ? "ask this server's operator for more seats"
    : "buy more seats (PUT /api/organizations/:id/seats) or move the organisation to a bigger plan";
  return new DomainError(
    402,
    `Seat limit reached: this organisation has ${count(limit.limit, "seat", "seats")} (${planPart}${extraPart}); ${usedPart}${heldPart}. Remove a member, revoke an invitation, give the role viewer or billing (no seat), or ${more}.`,
  );
}

/**
 * Refuses (402, naming the limit) a new seat over the organisation's limit, under a per-
 * organisation lock held to the end of `t`, so concurrent claims cannot both take the last
 * one. `countPending`: open invitations hold seats (an invitation, a direct add or a role
 * change claims a new one); an acceptance fills the seat its own invitation held, so counts
 * members only.
 */
export async function claimSeat(
  t: postgres.TransactionSql,
  organisationId: string,
  limit: SeatLimit,
  options: { countPending: boolean },
): Promise<void> {
  if (limit.limit === null) return;
  await t`select pg_advisory_xact_lock(hashtext(${`seats:${organisationId}`}))`;
  const { used, pending } = await seatsTaken(organisationId, t);
  const taken = used + (options.countPending ? pending : 0);
  if (taken + 1 > limit.limit) {
    throw refusal({ ...limit, limit: limit.limit }, used, options.countPending ? pending : 0);
  }
}

/**
 * Sets the seats an operator (`actor`, their id) gives an organisation on top of its plan's
 * (0 removes them), audited on the organisation. Lowering it takes no seat away: members keep
 * theirs, and new ones are refused until enough are free.
 */
export async function setExtraSeats(
  organisationId: string,
  seats: number,
  actor: string,
): Promise<SeatLimit> {
  if (!Number.isInteger(seats) || seats < 0 || seats > 100_000) {
    throw new DomainError(400, "seats: a whole number from 0 to 100000");
  }
  await db().begin(async (t) => {
    const [organisation] = await t`
      select id from users where id = ${organisationId} and kind = 'organisation' for update`;
    if (!organisation) throw new DomainError(404, "Organisation not found");
    const before = await extraSeats(organisationId, t);
    if (seats === 0) {
      await t`delete from organisation_seat_grants where organisation_id = ${organisationId}`;
    } else {
      await t`
        insert into organisation_seat_grants (organisation_id, extra_seats, set_by)
        values (${organisationId}, ${seats}, ${actor})
        on conflict (organisation_id) do update
          set extra_seats = excluded.extra_seats, set_by = excluded.set_by, set_at = now()`;
    }
    await recordAudit(
      {
        action: "seats.changed",
        userId: organisationId,
        target: organisationId,
        details: { from: before, to: seats },
      },
      t,
    );
  });
  return seatLimit(organisationId);
}
