import { randomUUID } from "node:crypto";
import type postgres from "postgres";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { usdToMicro } from "./money.server.ts";

// Credits and budgets. Before a call, the most it can cost is reserved (ai_reservations) under a
// per-user advisory lock, checked against the credit balance (credits mode) and the daily spend
// limit (both modes); after it, the reservation is replaced by the real debit. Concurrent calls
// therefore can never spend more than the balance (docs/decisions/0024).

/** Reservations older than this are from a crashed process: not counted, swept by the job. */
export const RESERVATION_TTL_MINUTES = 10;

export type BillingMode = "credits" | "byok";

export interface Reservation {
  id: string;
  userId: string;
  amountMicroUsd: number;
  mode: BillingMode;
}

type Tx = postgres.TransactionSql;

export const lockUser = (tx: Tx, userId: string) =>
  tx`select pg_advisory_xact_lock(hashtextextended(${`ai-credit:${userId}`}, 0))`;

export interface Standing {
  balance: number;
  held: number;
  spentToday: number;
  dailyLimit: number;
}

async function standing(sql: postgres.Sql | Tx, userId: string): Promise<Standing> {
  const [row] = await sql<
    { balance: number; held: number; spent_today: number; daily_limit: number | null }[]
  >`select
      coalesce((select sum(amount_micro_usd) from credit_ledger where user_id = ${userId}), 0)::bigint
        as balance,
      coalesce((select sum(amount_micro_usd) from ai_reservations where user_id = ${userId}
        and created_at > now() - make_interval(mins => ${RESERVATION_TTL_MINUTES})), 0)::bigint
        as held,
      coalesce((select sum(cost_micro_usd) from ai_usage where user_id = ${userId}
        and created_at >= date_trunc('day', now() at time zone 'utc') at time zone 'utc'), 0)::bigint
        as spent_today,
      (select daily_limit_micro_usd from ai_budgets where user_id = ${userId}) as daily_limit`;
  return {
    balance: row?.balance ?? 0,
    held: row?.held ?? 0,
    spentToday: row?.spent_today ?? 0,
    dailyLimit: row?.daily_limit ?? usdToMicro(env().AI_DAILY_LIMIT_USD),
  };
}

/** The user's credit balance, money held for calls in flight, today's spend and limit. */
export const userStanding = (userId: string) => standing(db(), userId);

/** Reserves `amount` micro-USD for a call, or answers 402 {error}. */
export async function reserve(
  userId: string,
  amountMicroUsd: number,
  mode: BillingMode,
): Promise<Reservation> {
  const id = `res_${randomUUID()}`;
  await db().begin(async (tx) => {
    await lockUser(tx, userId);
    const s = await standing(tx, userId);
    if (s.spentToday + s.held + amountMicroUsd > s.dailyLimit) {
      throw new DomainError(402, "Daily AI spend limit reached", {
        dailyLimitUsd: s.dailyLimit / 1e6,
      });
    }
    if (mode === "credits" && (s.balance - s.held < amountMicroUsd || s.balance <= 0)) {
      throw new DomainError(402, "Insufficient credits for this request");
    }
    await tx`insert into ai_reservations (id, user_id, amount_micro_usd)
      values (${id}, ${userId}, ${amountMicroUsd})`;
  });
  return { id, userId, amountMicroUsd, mode };
}

/** Sets a user's daily spend limit (USD), overriding AI_DAILY_LIMIT_USD. */
export async function setDailyLimit(userId: string, usd: number): Promise<void> {
  await db()`insert into ai_budgets (user_id, daily_limit_micro_usd)
    values (${userId}, ${usdToMicro(usd)})
    on conflict (user_id) do update set daily_limit_micro_usd = excluded.daily_limit_micro_usd,
      updated_at = now()`;
}

/** Deletes reservations left behind by crashed processes. */
export async function sweepStaleReservations(): Promise<number> {
  const rows = await db()`delete from ai_reservations
    where created_at < now() - make_interval(mins => ${RESERVATION_TTL_MINUTES}) returning 1`;
  return rows.length;
}
