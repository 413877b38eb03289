import { randomUUID } from "node:crypto";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { recordRefusal } from "./ai-metrics.server.ts";
import {
  activeLease,
  draw,
  drawUpTo,
  type Lease,
  nextReturn,
  openLease,
  pendingReturns,
  wantsRefill,
} from "./credit-leases.server.ts";
import { keepHoldsRenewed } from "./hold-renewal.server.ts";
import { usdToMicro } from "./money.server.ts";

// Credits and budgets. Before a call, the most it can cost is held on the user's ai_accounts row
// in ONE conditional statement — checked against the credit balance (credits mode) and the daily
// spend limit (both modes) — and recorded in ai_reservations; metering releases it and debits
// the real cost. The row lock of that statement is what serialises a user's concurrent calls, so
// they can never hold more than the balance (docs/decisions/0024).

export type BillingMode = "credits" | "byok";

export interface Reservation {
  /** The lease's ai_reservations row. */
  id: string;
  userId: string;
  amountMicroUsd: number;
  mode: BillingMode;
  lease: Lease;
}

export interface Standing {
  balance: number;
  held: number;
  spentToday: number;
  dailyLimit: number;
}

const defaultLimit = () => usdToMicro(env().AI_DAILY_LIMIT_USD);

/** The user's credit balance, money held for calls in flight, today's spend and limit. */
export async function userStanding(userId: string): Promise<Standing> {
  const [row] = await db()<
    { balance: number; held: number; spent: number; daily_limit: number | null }[]
  >`select balance_micro_usd as balance, held_micro_usd as held,
      case when spend_day = (now() at time zone 'utc')::date then spent_today_micro_usd else 0 end
        as spent,
      daily_limit_micro_usd as daily_limit
    from ai_accounts where user_id = ${userId}`;
  return {
    balance: row?.balance ?? 0,
    held: row?.held ?? 0,
    spentToday: row?.spent ?? 0,
    dailyLimit: row?.daily_limit ?? defaultLimit(),
  };
}

/**
 * Holds as much as the balance (credits) and the daily allowance leave, up to `max`, when that is
 * at least `min`, in one conditional statement; answers the amount held (0: refused).
 */
async function tryReserve(id: string, userId: string, min: number, max: number, mode: BillingMode) {
  const rows = await db()<{ amount: number }[]>`
    with free as (
      select user_id, least(${max}::bigint,
          coalesce(daily_limit_micro_usd, ${defaultLimit()})
            - case when spend_day = (now() at time zone 'utc')::date
                then spent_today_micro_usd else 0 end
            - held_micro_usd,
          case when ${mode} = 'byok' then ${max}::bigint
            when balance_micro_usd > 0 then balance_micro_usd - held_micro_usd
            else 0 end) as amount
      from ai_accounts where user_id = ${userId} for update
    ), acct as (
      update ai_accounts a set
        held_micro_usd = a.held_micro_usd + free.amount,
        spent_today_micro_usd = case when a.spend_day = (now() at time zone 'utc')::date
          then a.spent_today_micro_usd else 0 end,
        spend_day = (now() at time zone 'utc')::date
      from free
      where a.user_id = free.user_id and free.amount >= ${min} and free.amount > 0
      returning a.user_id, free.amount
    )
    insert into ai_reservations (id, user_id, amount_micro_usd)
    select ${id}, user_id, amount from acct returning amount_micro_usd as amount`;
  return Number(rows[0]?.amount ?? 0);
}

/** What a call asks to hold: a fixed amount, or as much as there is between `min` and `max`. */
export type HoldRequest = number | { min: number; max: number };

/**
 * Holds a call's amount, or answers 402 {error}. The hold is drawn from the process's lease on
 * the user's credit (credit-leases.server.ts); a new lease of AI_CREDIT_LEASE_USD (or what the
 * balance or the daily allowance leaves, when smaller) is taken in one conditional statement when
 * the current one cannot cover the call. A flexible request (`{min, max}`) gets `max` when there
 * is that much, else what is left if at least `min`. While the user's other calls in this process
 * are in flight, a call that cannot be covered waits for them to settle (up to `waitMs`, or until
 * `signal` aborts) before it is refused: their unused holds may pay for it.
 */
export async function reserve(
  userId: string,
  hold: HoldRequest,
  mode: BillingMode,
  { signal, waitMs = HOLD_WAIT_MS }: { signal?: AbortSignal; waitMs?: number } = {},
): Promise<Reservation> {
  const { min, max } = typeof hold === "number" ? { min: hold, max: hold } : hold;
  const deadline = Date.now() + waitMs;
  for (;;) {
    const held = await holdOnce(userId, min, max, mode);
    if (held) return held;
    if (!pendingReturns(userId, mode) || Date.now() >= deadline || signal?.aborted) {
      return refuse(userId, min);
    }
    await waitForReturn(userId, mode, deadline - Date.now(), signal);
  }
}

/** How long a call waits for the user's calls in flight to give back what they did not use. */
export const HOLD_WAIT_MS = 30_000;

function waitForReturn(userId: string, mode: BillingMode, ms: number, signal?: AbortSignal) {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener("abort", done, { once: true });
    void nextReturn(userId, mode).then(done);
  });
}

const reservation = (userId: string, mode: BillingMode, lease: Lease, amountMicroUsd: number) => ({
  id: lease.id,
  userId,
  amountMicroUsd,
  mode,
  lease,
});

/** One attempt: the current lease, else a new one; undefined when neither covers `min`. */
async function holdOnce(
  userId: string,
  min: number,
  max: number,
  mode: BillingMode,
): Promise<Reservation | undefined> {
  for (;;) {
    const lease = activeLease(userId, mode);
    if (lease && draw(lease, max)) {
      if (wantsRefill(lease)) refillAhead(lease);
      return reservation(userId, mode, lease, max);
    }
    // One lease request per user and mode at a time in this process: concurrent callers wait
    // for it and draw from it, instead of each taking a block.
    const key = `${userId}:${mode}`;
    const inFlight = opening.get(key);
    if (inFlight) {
      await inFlight.catch(() => {});
      const next = activeLease(userId, mode);
      if (next && next !== lease && draw(next, max)) {
        return reservation(userId, mode, next, max);
      }
      if (opening.has(key)) continue;
    }
    const promise = takeLease(userId, min, max, mode);
    opening.set(key, promise);
    let taken: Lease | undefined;
    try {
      taken = await promise;
    } finally {
      if (opening.get(key) === promise) opening.delete(key);
    }
    if (taken && draw(taken, max)) return reservation(userId, mode, taken, max);
    // Less than `max` is left: the most the current lease (new or old) has, if it covers `min`.
    const current = activeLease(userId, mode);
    const amount = current && min < max ? drawUpTo(current, min, max) : 0;
    if (current && amount > 0) return reservation(userId, mode, current, amount);
    if (taken) continue; // a concurrent caller drew the new lease first
    return undefined;
  }
}

const opening = new Map<string, Promise<Lease | undefined>>();

/**
 * Takes the next full block in the background while the current lease still serves calls, so
 * a busy user's requests never wait on the lease statement (it was the stream p99 tail:
 * docs/decisions/0086). Only a full block: when the balance or the daily allowance cannot cover
 * one, the current lease keeps serving and the request path takes the smaller lease as before.
 */
function refillAhead(lease: Lease): void {
  const key = `${lease.userId}:${lease.mode}`;
  if (opening.has(key)) return;
  const block = usdToMicro(env().AI_CREDIT_LEASE_USD);
  if (block <= 0) return;
  const id = `res_${randomUUID()}`;
  const promise = tryReserve(id, lease.userId, block, block, lease.mode).then((size) => {
    const ok = size > 0;
    // A lease that was replaced meanwhile (rotation on the request path) keeps its successor.
    if (ok && activeLease(lease.userId, lease.mode) === lease) {
      keepHoldsRenewed();
      return openLease(id, lease.userId, lease.mode, block);
    }
    if (ok) return releaseUnused(id, lease.userId, block).then(() => lease);
    return lease;
  });
  opening.set(key, promise);
  promise
    .catch((error: unknown) => logger().warn({ err: error }, "credit lease refill failed"))
    .finally(() => {
      if (opening.get(key) === promise) opening.delete(key);
    });
}

/** Gives back a block that was taken and not needed. */
async function releaseUnused(id: string, userId: string, amount: number): Promise<void> {
  await db()`with gone as (delete from ai_reservations where id = ${id} returning 1)
    update ai_accounts set held_micro_usd = greatest(0, held_micro_usd - ${amount})
    where user_id = ${userId} and exists (select 1 from gone)`;
}

/**
 * A new lease: a block (AI_CREDIT_LEASE_USD, at least `max`), or what the balance or the daily
 * allowance leaves when that is less, if it covers `min`. undefined when it does not.
 */
async function takeLease(
  userId: string,
  min: number,
  max: number,
  mode: BillingMode,
): Promise<Lease | undefined> {
  const block = Math.max(max, usdToMicro(env().AI_CREDIT_LEASE_USD));
  const id = `res_${randomUUID()}`;
  let size = await tryReserve(id, userId, min, block, mode);
  if (size === 0 && mode === "byok") {
    // The slow path only: create the account of a BYOK user who never had credits.
    const [exists] = await db()`select 1 from ai_accounts where user_id = ${userId}`;
    if (!exists) {
      await db()`insert into ai_accounts (user_id) values (${userId}) on conflict do nothing`;
      size = await tryReserve(id, userId, min, block, mode);
    }
  }
  if (size === 0) return undefined;
  keepHoldsRenewed();
  return openLease(id, userId, mode, size);
}

async function refuse(userId: string, amount: number): Promise<never> {
  const s = await userStanding(userId);
  if (s.spentToday + s.held + amount > s.dailyLimit) {
    recordRefusal("daily_limit");
    throw new DomainError(402, "Daily AI spend limit reached", {
      dailyLimitUsd: s.dailyLimit / 1e6,
    });
  }
  recordRefusal("credits");
  throw new DomainError(402, "Insufficient credits for this request");
}

/** Sets a user's daily AI spend limit (USD), overriding AI_DAILY_LIMIT_USD. */
export async function setDailyLimit(userId: string, usd: number): Promise<void> {
  await db()`insert into ai_accounts (user_id, daily_limit_micro_usd)
    values (${userId}, ${usdToMicro(usd)})
    on conflict (user_id) do update set daily_limit_micro_usd = excluded.daily_limit_micro_usd,
      updated_at = now()`;
}
