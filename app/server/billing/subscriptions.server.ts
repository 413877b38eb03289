import type postgres from "postgres";
import type { User } from "../accounts/model.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import { logger } from "../platform/logger.server.ts";
import {
  itemByPriceId,
  type PlanId,
  planLimits,
  planRank,
  plans,
  priceIdOf,
} from "./catalog.server.ts";
import { customerIdOf } from "./checkout.server.ts";
import {
  defaultPlan,
  type OperatorPlan,
  operatorPlan,
  selfHosted,
} from "./plan-assignments.server.ts";
import { GIB, storageEntitlement } from "./storage-limit.server.ts";
import { type Stripe, stripe, stripeFailure } from "./stripe.server.ts";

// Subscription state as Stripe last said it was. Only writeSubscription writes it, always from a
// subscription object read from Stripe under the same per-subscription lock (and a per-user
// lock), so any delivery order of webhooks converges on Stripe's current state. Every change is an append-only ledger row, and
// users.plan follows the user's best live plan subscription.

/** Statuses under which a subscription grants its plan (provisioning needs active/trialing). */
export const GRANTING_STATUSES = ["active", "trialing"] as const;
/** Statuses under which the plan stays on the account (Stripe is still retrying payment). */
const PLAN_KEEPING_STATUSES = ["active", "trialing", "past_due"];

export interface SubscriptionRow {
  id: string;
  user_id: string;
  stripe_customer_id: string;
  kind: "plan" | "addon" | "suite" | "api";
  item: string;
  price_id: string;
  status: string;
  current_period_end: Date | null;
  cancel_at_period_end: boolean;
  canceled_at: Date | null;
  seat_quantity: number;
  seats_kept: number;
  seats_kept_until: Date | null;
  updated_at: Date;
}

const lockUser = (t: postgres.TransactionSql, userId: string) =>
  t`select pg_advisory_xact_lock(hashtext(${`billing:${userId}`}))`;

/** The period end of a subscription (stripe 23: on the items, not the subscription). */
function periodEnd(sub: Stripe.Subscription): Date | null {
  const ends = sub.items.data
    .map((i) => i.current_period_end)
    .filter((n): n is number => typeof n === "number");
  return ends.length ? new Date(Math.max(...ends) * 1000) : null;
}

const idOf = (value: string | { id: string } | null | undefined) =>
  typeof value === "string" ? value : value?.id;

/**
 * Holds a per-subscription lock for one transaction. Whoever reads a subscription from Stripe
 * and writes it does both under this lock, so the last writer wrote what it read last: two
 * overlapping jobs cannot store an older state after a newer one (e.g. `active` after
 * `canceled`). Taken before the per-user lock, always in that order.
 */
function underSubscriptionLock<T>(
  subscriptionId: string,
  fn: (t: postgres.TransactionSql) => Promise<T>,
): Promise<T> {
  return db().begin(async (t) => {
    await t`select pg_advisory_xact_lock(hashtext(${`billing-sub:${subscriptionId}`}))`;
    return fn(t);
  }) as Promise<T>;
}

interface Written {
  userId: string | undefined;
  /** Set when this write moved the subscription to `canceled`: the instance stop to schedule. */
  canceled?: { periodEnd: Date | null };
}

/**
 * Writes what Stripe says about one subscription. Returns the user id it belongs to, or
 * undefined when the subscription is not ours (no known user, or a price not in the catalog).
 */
export async function syncSubscription(
  sub: Stripe.Subscription,
  reference: string,
): Promise<string | undefined> {
  return afterWrite(
    await underSubscriptionLock(sub.id, (t) => writeSubscription(t, sub, reference)),
  );
}

async function afterWrite(written: Written): Promise<string | undefined> {
  if (written.canceled && written.userId) {
    await scheduleInstanceStop(written.userId, written.canceled.periodEnd);
  }
  return written.userId;
}

async function writeSubscription(
  t: postgres.TransactionSql,
  sub: Stripe.Subscription,
  reference: string,
): Promise<Written> {
  const customerId = idOf(sub.customer)!;
  // On t: a second pool connection while holding the lock could starve a full pool.
  const [owner] = await t<{ user_id: string }[]>`
    select user_id from billing_customers where stripe_customer_id = ${customerId}`;
  const userId = sub.metadata?.userId || owner?.user_id;
  // The item that names the plan (or add-on...); the seat price is a quantity beside it.
  const seatPrice = env().STRIPE_PRICE_SEAT;
  const priceId = sub.items.data.find((i) => i.price?.id !== seatPrice)?.price?.id;
  const seats = seatQuantityOf(sub);
  const item = priceId ? itemByPriceId(priceId) : undefined;
  if (!userId || !priceId || !item || item.kind === "credits" || item.kind === "storage") {
    logger().warn(
      { subscription: sub.id, customer: customerId, price: priceId },
      "subscription ignored: unknown user or price not in the catalog",
    );
    return { userId: undefined };
  }
  const kind = item.kind;
  const end = periodEnd(sub);
  await lockUser(t, userId);
  const [user] = await t<{ id: string }[]>`select id from users where id = ${userId}`;
  if (!user) return { userId };
  const [before] = await t<SubscriptionRow[]>`select * from subscriptions where id = ${sub.id}`;
  const kept = keptSeats(before, seats);
  await t`
    insert into subscriptions (id, user_id, stripe_customer_id, kind, item, price_id, status,
      current_period_end, cancel_at_period_end, canceled_at, seat_quantity, seats_kept,
      seats_kept_until)
    values (${sub.id}, ${userId}, ${customerId}, ${kind}, ${item.id}, ${priceId}, ${sub.status},
      ${end}, ${sub.cancel_at_period_end ?? false},
      ${sub.canceled_at ? new Date(sub.canceled_at * 1000) : null}, ${seats}, ${kept.seats},
      ${kept.until})
    on conflict (id) do update set kind = excluded.kind, item = excluded.item,
      price_id = excluded.price_id, status = excluded.status,
      current_period_end = excluded.current_period_end,
      cancel_at_period_end = excluded.cancel_at_period_end,
      canceled_at = excluded.canceled_at, seat_quantity = excluded.seat_quantity,
      seats_kept = excluded.seats_kept, seats_kept_until = excluded.seats_kept_until,
      updated_at = now()`;
  const changed =
    !before ||
    before.status !== sub.status ||
    before.seat_quantity !== seats ||
    before.item !== item.id ||
    before.current_period_end?.getTime() !== end?.getTime() ||
    before.cancel_at_period_end !== (sub.cancel_at_period_end ?? false);
  if (changed) {
    const detail = [
      before && before.item !== item.id ? `${before.item} -> ${item.id}` : undefined,
      end ? `period end ${end.toISOString()}` : undefined,
      sub.cancel_at_period_end ? "cancels at period end" : undefined,
      (before?.seat_quantity ?? 0) !== seats
        ? `seats ${before?.seat_quantity ?? 0} -> ${seats}${kept.until ? ` (${kept.seats} kept until ${kept.until.toISOString()})` : ""}`
        : undefined,
    ]
      .filter(Boolean)
      .join("; ");
    await t`
      insert into billing_ledger (user_id, subscription_id, kind, item, from_status, to_status,
        detail, reference)
      values (${userId}, ${sub.id}, 'subscription', ${item.id}, ${before?.status ?? null},
        ${sub.status}, ${detail || null}, ${reference})`;
    await recordAudit(
      {
        action: "plan.changed",
        userId,
        target: sub.id,
        details: {
          item: item.id,
          fromItem: before?.item ?? null,
          fromStatus: before?.status ?? null,
          toStatus: sub.status,
          cancelAtPeriodEnd: sub.cancel_at_period_end ?? false,
        },
      },
      t,
    );
  }
  await refreshUserPlan(t, userId);
  const canceledNow = sub.status === "canceled" && before?.status !== "canceled";
  return canceledNow ? { userId, canceled: { periodEnd: end } } : { userId };
}

/** The quantity of the seat price on the subscription (0 without a seat item). */
export function seatQuantityOf(sub: Stripe.Subscription): number {
  const seatPrice = env().STRIPE_PRICE_SEAT;
  if (!seatPrice) return 0;
  return sub.items.data
    .filter((i) => i.price?.id === seatPrice)
    .reduce((sum, i) => sum + (i.quantity ?? 0), 0);
}

/**
 * Seats lowered during a paid period stay until its end (decision 0215): the count kept and
 * until when, from the row as it was and the new quantity. Raising them again, or a new period,
 * ends the keeping.
 */
function keptSeats(
  before: SubscriptionRow | undefined,
  seats: number,
): { seats: number; until: Date | null } {
  if (!before) return { seats: 0, until: null };
  const stillKept =
    before.seats_kept_until && before.seats_kept_until.getTime() > Date.now()
      ? before.seats_kept
      : 0;
  const paidFor = Math.max(before.seat_quantity, stillKept);
  const until =
    before.seats_kept_until && stillKept > 0 ? before.seats_kept_until : before.current_period_end;
  if (seats >= paidFor || !until || until.getTime() <= Date.now()) return { seats: 0, until: null };
  return { seats: paidFor, until };
}

/**
 * A canceled plan stops the user's instance at the end of the paid period (now, when that has
 * passed). The job checks the subscription again when it runs.
 */
async function scheduleInstanceStop(userId: string, periodEnd: Date | null | undefined) {
  const startAfter = periodEnd && periodEnd.getTime() > Date.now() ? periodEnd : new Date();
  await sendJob("stop-unpaid-instance", { userId }, { startAfter });
}

/** users.plan := the best plan among the user's plan/API/suite subscriptions that keep it. */
async function refreshUserPlan(t: postgres.TransactionSql, userId: string): Promise<void> {
  const rows = await t<{ item: string }[]>`
    select item from subscriptions
    where user_id = ${userId} and kind in ('plan', 'api', 'suite')
      and status = any(${PLAN_KEEPING_STATUSES})`;
  const best = rows.map((r) => r.item).sort((a, b) => planRank(b) - planRank(a))[0] ?? "free";
  await t`update users set plan = ${best}, updated_at = now()
    where id = ${userId} and plan is distinct from ${best}`;
}

/** Re-reads a subscription from Stripe and writes it (the webhook job's way of learning). */
export async function refreshSubscriptionFromStripe(subscriptionId: string, reference: string) {
  // The read happens under the lock (not before it): see underSubscriptionLock.
  const written = await underSubscriptionLock(subscriptionId, async (t) => {
    let sub: Stripe.Subscription;
    try {
      sub = await stripe().subscriptions.retrieve(subscriptionId);
    } catch (error) {
      throw stripeFailure(error);
    }
    return writeSubscription(t, sub, reference);
  });
  return afterWrite(written);
}

/**
 * Reads a subscription from Stripe, changes it there with `update` and writes the result, all
 * under the subscription's lock (as changePlan does): the seat quantity's way of changing it.
 */
export async function updateSubscriptionInStripe(
  subscriptionId: string,
  reference: string,
  update: (sub: Stripe.Subscription) => Promise<Stripe.Subscription>,
): Promise<void> {
  const written = await underSubscriptionLock(subscriptionId, async (t) => {
    let updated: Stripe.Subscription;
    try {
      updated = await update(await stripe().subscriptions.retrieve(subscriptionId));
    } catch (error) {
      throw stripeFailure(error);
    }
    return writeSubscription(t, updated, reference);
  });
  await afterWrite(written);
}

/**
 * True when the user has a plan that hosts agents: an active or trialing plan (or billing-API
 * plan, or the suite), or one an operator gives (decision 0100). Agent provisioning answers 402
 * otherwise.
 */
export async function hasActiveSubscription(userId: string): Promise<boolean> {
  return (await activePlanItems(userId)).length > 0;
}

/** For provisioning: throws 402 without an active or trialing subscription or a given plan. */
export async function requireActiveSubscription(userId: string): Promise<void> {
  if (!(await hasActiveSubscription(userId))) {
    throw new DomainError(
      402,
      selfHosted()
        ? "An active subscription or a plan from the operator is required: this server takes no payments, so ask its operator (see /billing)"
        : "An active subscription is required: see /pricing",
    );
  }
}

/**
 * The plan ids that grant the user hosting: their active or trialing plan, API-plan and suite
 * subscriptions, plus the plan operators give (an assignment, else the self-hosted default).
 * The one source of the provisioning gate, the tier limit and the billing summary.
 */
export async function activePlanItems(userId: string): Promise<string[]> {
  const [rows, given] = await Promise.all([
    db()<{ item: string }[]>`
      select item from subscriptions
      where user_id = ${userId} and kind in ('plan', 'api', 'suite')
        and status = any(${GRANTING_STATUSES as unknown as string[]})`,
    operatorPlan(userId),
  ]);
  const items = rows.map((r) => r.item);
  return given.plan === "none" ? items : [...items, given.plan];
}

export type PlanSource = "subscription" | OperatorPlan["source"] | "none";

/**
 * The plan the user has, and where it comes from: the best of the processor's plan (which
 * `users.plan` keeps, past_due included) and the operator's. `free` with source `none`.
 */
export async function effectivePlan(userId: string): Promise<{
  plan: string;
  source: PlanSource;
  operator: OperatorPlan;
}> {
  const [[user], operator] = await Promise.all([
    db()<{ plan: string }[]>`select plan from users where id = ${userId}`,
    operatorPlan(userId),
  ]);
  return { ...bestPlan(user?.plan, operator), operator };
}

/** The better of the processor's plan (`users.plan`) and the operator's. */
function bestPlan(
  usersPlan: string | undefined,
  operator: { plan: string; source: OperatorPlan["source"] },
): { plan: string; source: PlanSource } {
  const paid = usersPlan && usersPlan !== "free" ? usersPlan : undefined;
  const given = operator.plan === "none" ? undefined : operator.plan;
  if (paid && (!given || planRank(paid) >= planRank(given))) {
    return { plan: paid, source: "subscription" };
  }
  if (given) return { plan: given, source: operator.source };
  return { plan: "free", source: "none" };
}

/**
 * effectivePlan's plan for an authenticated user: without a query when the credential lookup
 * read the user's assignment with it (a cached credential is dropped when either changes).
 */
export async function planOfUser(user: User): Promise<string> {
  if (user.assignedPlan === undefined) return (await effectivePlan(user.id)).plan;
  const operator =
    user.assignedPlan === null
      ? { plan: defaultPlan(), source: "default" as const }
      : { plan: user.assignedPlan, source: "assigned" as const };
  return bestPlan(user.plan, operator).plan;
}

export async function listSubscriptions(userId: string): Promise<SubscriptionRow[]> {
  return db()<SubscriptionRow[]>`
    select * from subscriptions where user_id = ${userId}
    order by (status in ('active', 'trialing', 'past_due')) desc, updated_at desc`;
}

export interface LedgerEntry {
  kind: string;
  item: string | null;
  fromStatus: string | null;
  toStatus: string | null;
  detail: string | null;
  createdAt: string;
}

export async function billingHistory(userId: string, limit = 20): Promise<LedgerEntry[]> {
  const rows = await db()<
    {
      kind: string;
      item: string | null;
      from_status: string | null;
      to_status: string | null;
      detail: string | null;
      created_at: Date;
    }[]
  >`select kind, item, from_status, to_status, detail, created_at from billing_ledger
    where user_id = ${userId} order by created_at desc, id desc limit ${limit}`;
  return rows.map((r) => ({
    kind: r.kind,
    item: r.item,
    fromStatus: r.from_status,
    toStatus: r.to_status,
    detail: r.detail,
    createdAt: r.created_at.toISOString(),
  }));
}

/** Storage limit in GB the user is owed (storage-limit.server.ts, decision 0217). */
export async function storageLimitGb(userId: string): Promise<number> {
  return (await storageEntitlement(userId)).limitBytes / GIB;
}

/** The subscription that carries the user's monthly plan, if any is live. */
export async function currentPlanSubscription(userId: string) {
  const [row] = await db()<SubscriptionRow[]>`
    select * from subscriptions where user_id = ${userId} and kind = 'plan'
      and status in ('active', 'trialing', 'past_due')
    order by updated_at desc limit 1`;
  return row;
}

/**
 * Changes the plan of an existing live plan subscription in place (Stripe prorates); the state
 * follows from the customer.subscription.updated webhook, and is also re-read right away.
 */
export async function changePlan(userId: string, plan: PlanId): Promise<void> {
  const current = await currentPlanSubscription(userId);
  if (!current) throw new DomainError(409, "No live plan subscription to change");
  const target = plans.find((p) => p.id === plan)!;
  const price = priceIdOf(target.priceVar);
  if (!price) throw new DomainError(503, `No Stripe price is configured for plan '${plan}'`);
  if (current.item === plan) return;
  const client = stripe();
  // Read, update and write under the subscription's lock, like a webhook job's refresh.
  const written = await underSubscriptionLock(current.id, async (t) => {
    let updated: Stripe.Subscription;
    try {
      const sub = await client.subscriptions.retrieve(current.id);
      // The plan's item, not the seats' (decision 0215).
      const itemId = sub.items.data.find((i) => i.price?.id !== env().STRIPE_PRICE_SEAT)?.id;
      if (!itemId) throw new DomainError(502, "Subscription has no item to change");
      updated = await client.subscriptions.update(current.id, {
        items: [{ id: itemId, price }],
        proration_behavior: "create_prorations",
        metadata: { ...sub.metadata, userId, kind: "plan", item: plan },
      });
    } catch (error) {
      throw stripeFailure(error);
    }
    return writeSubscription(t, updated, `change-plan:${plan}`);
  });
  await afterWrite(written);
}

/** What a plan would not cover: agents above its thread count (nothing is stopped for it). */
export function downgradeWarning(plan: string, agentCount: number): string | undefined {
  const allowed = planLimits(plan).agentThreads;
  if (allowed === null || agentCount <= allowed) return undefined;
  return `You run ${agentCount} agents; the ${plan} plan allows ${allowed}. Nothing is stopped: stop ${agentCount - allowed} yourself, or new ones cannot be started.`;
}

export { customerIdOf };
