import { randomUUID } from "node:crypto";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { activeLease, draw, type Lease, openLease, wantsRefill } from "./credit-leases.server.ts";
import { usdToMicro } from "./money.server.ts";

// Credits and budgets. Before a call, the most it can cost is held on the user's ai_accounts row
// in ONE conditional statement — checked against the credit balance (credits mode) and the daily
// spend limit (both modes) — and recorded in ai_reservations; metering releases it and debits
// the real cost. The row lock of that statement is what serialises a user's concurrent calls, so
// they can never hold more than the balance (docs/decisions/0024).

/** Reservations older than this are from a crashed process: swept by the catalog job. */
export const RESERVATION_TTL_MINUTES = 10;

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

async function tryReserve(id: string, userId: string, amount: number, mode: BillingMode) {
  const rows = await db()`
    with acct as (
      update ai_accounts set
        held_micro_usd = held_micro_usd + ${amount},
        spent_today_micro_usd = case when spend_day = (now() at time zone 'utc')::date
          then spent_today_micro_usd else 0 end,
        spend_day = (now() at time zone 'utc')::date
      where user_id = ${userId}
        and case when spend_day = (now() at time zone 'utc')::date
              then spent_today_micro_usd else 0 end
            + held_micro_usd + ${amount} <= coalesce(daily_limit_micro_usd, ${defaultLimit()})
        and (${mode} = 'byok'
          or (balance_micro_usd > 0 and balance_micro_usd - held_micro_usd >= ${amount}))
      returning user_id
    )
    insert into ai_reservations (id, user_id, amount_micro_usd)
    select ${id}, user_id, ${amount} from acct returning id`;
  return rows.length > 0;
}

/**
 * Holds `amount` micro-USD for a call, or answers 402 {error}. The hold is drawn from the
 * process's lease on the user's credit (credit-leases.server.ts); a new lease of
 * AI_CREDIT_LEASE_USD (or just `amount` when the balance or the daily allowance is smaller) is
 * taken in one conditional statement when the current one cannot cover the call.
 */
export async function reserve(
  userId: string,
  amountMicroUsd: number,
  mode: BillingMode,
): Promise<Reservation> {
  for (;;) {
    const lease = activeLease(userId, mode);
    if (lease && draw(lease, amountMicroUsd)) {
      if (wantsRefill(lease)) refillAhead(lease);
      return { id: lease.id, userId, amountMicroUsd, mode, lease };
    }
    // One lease request per user and mode at a time in this process: concurrent callers wait
    // for it and draw from it, instead of each taking a block.
    const key = `${userId}:${mode}`;
    const inFlight = opening.get(key);
    if (inFlight) {
      await inFlight.catch(() => {});
      const next = activeLease(userId, mode);
      if (next && next !== lease && draw(next, amountMicroUsd)) {
        return { id: next.id, userId, amountMicroUsd, mode, lease: next };
      }
      if (opening.has(key)) continue;
    }
    const promise = takeLease(userId, amountMicroUsd, mode);
    opening.set(key, promise);
    try {
      const taken = await promise;
      if (!draw(taken, amountMicroUsd)) continue; // a concurrent caller drew it first
      return { id: taken.id, userId, amountMicroUsd, mode, lease: taken };
    } finally {
      if (opening.get(key) === promise) opening.delete(key);
    }
  }
}

const opening = new Map<string, Promise<Lease>>();

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
  const promise = tryReserve(id, lease.userId, block, lease.mode).then((ok) => {
    // A lease that was replaced meanwhile (rotation on the request path) keeps its successor.
    if (ok && activeLease(lease.userId, lease.mode) === lease) {
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

async function takeLease(userId: string, amount: number, mode: BillingMode): Promise<Lease> {
  const block = Math.max(amount, usdToMicro(env().AI_CREDIT_LEASE_USD));
  for (const size of block > amount ? [block, amount] : [amount]) {
    const id = `res_${randomUUID()}`;
    let ok = await tryReserve(id, userId, size, mode);
    if (!ok) {
      // The slow path only: create the account of a BYOK user who never had credits.
      const [exists] = await db()`select 1 from ai_accounts where user_id = ${userId}`;
      if (!exists && mode === "byok") {
        await db()`insert into ai_accounts (user_id) values (${userId}) on conflict do nothing`;
        ok = await tryReserve(id, userId, size, mode);
      }
    }
    if (ok) return openLease(id, userId, mode, size);
  }
  const s = await userStanding(userId);
  if (s.spentToday + s.held + amount > s.dailyLimit) {
    throw new DomainError(402, "Daily AI spend limit reached", {
      dailyLimitUsd: s.dailyLimit / 1e6,
    });
  }
  throw new DomainError(402, "Insufficient credits for this request");
}

/** Sets a user's daily AI spend limit (USD), overriding AI_DAILY_LIMIT_USD. */
export async function setDailyLimit(userId: string, usd: number): Promise<void> {
  await db()`insert into ai_accounts (user_id, daily_limit_micro_usd)
    values (${userId}, ${usdToMicro(usd)})
    on conflict (user_id) do update set daily_limit_micro_usd = excluded.daily_limit_micro_usd,
      updated_at = now()`;
}

/** Releases reservations left behind by crashed processes. */
export async function sweepStaleReservations(): Promise<number> {
  const rows = await db()<{ n: number }[]>`
    with gone as (
      delete from ai_reservations
      where created_at < now() - make_interval(mins => ${RESERVATION_TTL_MINUTES})
      returning user_id, amount_micro_usd
    ), per_user as (
      select user_id, sum(amount_micro_usd) as amount, count(*) as n from gone group by user_id
    ), released as (
      update ai_accounts a set held_micro_usd = greatest(0, a.held_micro_usd - p.amount)
      from per_user p where a.user_id = p.user_id returning p.n
    )
    select coalesce(sum(n), 0)::int as n from released`;
  return rows[0]?.n ?? 0;
}
