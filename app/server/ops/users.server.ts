import { randomUUID } from "node:crypto";
import { credentialCache } from "../accounts/credential-cache.server.ts";
import { creditBalance, creditLedger } from "../accounts/credits.server.ts";
import { toUser, type UserRow } from "../accounts/model.server.ts";
import { revokeAllSessions } from "../accounts/sessions.server.ts";
import { deleteUser } from "../accounts/users.server.ts";
import { getInstanceByUser } from "../agents/instances.server.ts";
import { grantCredits } from "../billing/credit-grants.server.ts";
import { type AssignedPlan, assignPlan, operatorPlan } from "../billing/plan-assignments.server.ts";
import { billingHistory } from "../billing/subscriptions.server.ts";
import { type Seats, seatsOf, setExtraSeats } from "../organisations/seats.server.ts";
import { listAudit, recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError, notFound } from "../platform/errors.server.ts";
import { sendJob } from "../platform/jobs.server.ts";

// The console's users: search, one user's figures, suspension, the operator role, deletion.
// Each change is audited on the user it concerns; the actor is the operator (asOperator).

export interface OpsUserSummary {
  id: string;
  email: string;
  name: string;
  plan: string;
  isOperator: boolean;
  suspended: boolean;
  createdAt: string;
}

const summaryOf = (row: UserRow): OpsUserSummary => {
  const user = toUser(row);
  return {
    id: user.id,
    email: user.email,
    name: user.name,
    plan: user.plan,
    isOperator: user.isOperator,
    suspended: user.suspendedAt !== null,
    createdAt: user.createdAt.toISOString(),
  };
};

/** Users whose id, email or name contains `q` (all when empty), newest first. */
export async function searchUsers(q: string, limit = 50): Promise<OpsUserSummary[]> {
  const term = `%${q.trim().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const rows = await db()<UserRow[]>`
    select * from users
    where ${q.trim() === "" ? db()`true` : db()`(id ilike ${term} or email ilike ${term} or name ilike ${term})`}
    order by created_at desc, id desc limit ${limit}`;
  return rows.map(summaryOf);
}

async function userRow(userId: string): Promise<UserRow> {
  const [row] = await db()<UserRow[]>`select * from users where id = ${userId}`;
  if (!row) throw notFound("User");
  return row;
}

/** One user for the console: account, plan history, credits with the ledger, instance, log. */
export async function opsUserDetail(userId: string) {
  const row = await userRow(userId);
  const [plan, credits, ledger, billing, instance, audit, agents, seats] = await Promise.all([
    operatorPlan(userId),
    creditBalance(userId),
    creditLedger(userId),
    billingHistory(userId),
    getInstanceByUser(userId),
    listAudit({ userId, limit: 50 }),
    db()<{ count: number }[]>`select count(*)::int as count from agents where user_id = ${userId}`,
    row.kind === "organisation" ? seatsOf(userId) : Promise.resolve(null),
  ]);
  return {
    user: {
      ...summaryOf(row),
      suspendedAt: row.suspended_at?.toISOString() ?? null,
      operatorFromEnv: toUser(row).isOperator && !row.is_operator,
    },
    assignedPlan: plan,
    credits,
    ledger,
    /** A fresh idempotency key per rendered grant form: a resubmitted form grants once. */
    grantKey: randomUUID(),
    billing,
    agents: agents[0]?.count ?? 0,
    instance: instance
      ? {
          id: instance.id,
          desiredState: instance.desired_state,
          observedState: instance.observed_state,
        }
      : null,
    audit: audit.entries,
    /** An organisation's seats (its plan's, the operator's extra ones, taken); null for a person. */
    seats: seats satisfies Seats | null,
  };
}

/**
 * Suspends an account at once: its sessions are revoked, its API keys (and gateway tokens)
 * stop resolving while it is suspended, and its gateway is stopped by the worker.
 */
export async function suspendUser(operatorId: string, userId: string, reason: string) {
  if (operatorId === userId) throw new DomainError(400, "You cannot suspend yourself");
  const instance = await db().begin(async (t) => {
    const [row] = await t<UserRow[]>`
      update users set suspended_at = now(), suspended_reason = ${reason || null}, updated_at = now()
      where id = ${userId} and suspended_at is null returning *`;
    if (!row) {
      await userRow(userId);
      throw new DomainError(409, "The account is already suspended");
    }
    await revokeAllSessions(userId, t);
    // This process refuses at once; other replicas hear the users row's NOTIFY.
    credentialCache()?.forgetUser(userId);
    await recordAudit({ action: "user.suspended", userId, target: userId, details: { reason } }, t);
    return getInstanceByUser(userId);
  });
  // The worker stops it (desired state stopped, so reconcile keeps it down).
  if (instance) await sendJob("instance-action", { instanceId: instance.id, action: "stop" });
  return { suspended: true, agentsStopping: instance !== undefined };
}

/** Lifts a suspension; the user signs in again and starts their agents themselves. */
export async function unsuspendUser(userId: string) {
  const rows = await db()`
    update users set suspended_at = null, suspended_reason = null, updated_at = now()
    where id = ${userId} and suspended_at is not null returning id`;
  if (rows.length === 0) {
    await userRow(userId);
    throw new DomainError(409, "The account is not suspended");
  }
  await recordAudit({ action: "user.unsuspended", userId, target: userId });
  return { suspended: false };
}

/** Grants or revokes the operator role (the console only; never the public API). */
export async function setOperator(operatorId: string, userId: string, operator: boolean) {
  if (!operator && operatorId === userId) {
    throw new DomainError(400, "You cannot revoke your own operator role");
  }
  const rows = await db()`
    update users set is_operator = ${operator}, updated_at = now()
    where id = ${userId} and is_operator <> ${operator} returning id`;
  if (rows.length === 0) await userRow(userId);
  else {
    await recordAudit({
      action: operator ? "operator.granted" : "operator.revoked",
      userId,
      target: userId,
    });
  }
  return { operator };
}

/** Deletes an account as DELETE /api/user does (teardown of its agents, user.deleted). */
export async function deleteUserAsOperator(operatorId: string, userId: string) {
  if (operatorId === userId) {
    throw new DomainError(400, "Delete your own account from your settings");
  }
  await deleteUser(userId);
  return { deleted: true };
}

/** "12", "12.5" or "12.50" USD as integer micro-USD (no floating point on money). */
export function usdToMicro(amount: string): number {
  const m = /^(\d{1,5})(?:\.(\d{1,2}))?$/.exec(amount.trim());
  if (!m) throw new DomainError(400, "amount: a number of dollars with at most two decimals");
  const micro = Number(m[1]) * 1_000_000 + Number((m[2] ?? "").padEnd(2, "0")) * 10_000;
  if (micro <= 0) throw new DomainError(400, "amount: must be more than zero");
  return micro;
}

/** An operator's credit grant (billing's grantCredits: once per idempotency key, audited). */
export function grantCreditsAsOperator(
  operatorId: string,
  userId: string,
  input: { amount: string; reason: string; idempotencyKey: string },
) {
  return grantCredits(
    userId,
    usdToMicro(input.amount),
    input.reason,
    operatorId,
    input.idempotencyKey,
  );
}

/** An operator's plan assignment (billing's assignPlan; `default` removes it; audited). */
export function assignPlanAsOperator(
  operatorId: string,
  userId: string,
  plan: AssignedPlan | "default",
) {
  return assignPlan(userId, plan, operatorId);
}

/**
 * An operator's extra seats for an organisation, on top of its plan's (organisations' seats:
 * 0 removes them; audited on the organisation as seats.changed). Decision 0204.
 */
export function setOrganisationSeatsAsOperator(
  operatorId: string,
  organisationId: string,
  extraSeats: number,
) {
  return setExtraSeats(organisationId, extraSeats, operatorId);
}
