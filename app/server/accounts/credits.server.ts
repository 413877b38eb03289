import { randomUUID } from "node:crypto";
import type postgres from "postgres";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";

// One ledger of money for the whole platform (credit_ledger, integer micro-USD): one platform
// credit is one USD, the unit of the contract's credit packs. The AI layer debits the same
// ledger. docs/decisions/0013-referrals-and-credits.md

/** What a referral is worth, to the new user and to the referrer each. */
export const REFERRAL_CREDITS = 5;
export const MICRO_USD_PER_CREDIT = 1_000_000;
/**
 * Referrals one referrer is paid for, ever; later referred accounts still register, unpaid
 * (neither side), so one code cannot mint credit without end. docs/decisions/0196
 */
export const REFERRALS_PAID_PER_REFERRER = 20;

/**
 * Pays `userId`'s referral, inside the caller's transaction, once the account's email is
 * verified: registering proves no mailbox, so a referral paid at sign-up could be farmed with
 * made-up addresses. Called wherever an email becomes verified; paying twice is impossible (the
 * ledger's uniqueness), so a second verification or a retry is a no-op. Within the referrer's
 * cap only; the referrer's referrals are serialised so two at once cannot both take the last
 * place.
 */
export async function payReferral(t: postgres.TransactionSql, userId: string): Promise<void> {
  const [row] = await t<{ referred_by: string | null; email_verified: boolean }[]>`
    select referred_by, email_verified from users where id = ${userId}`;
  if (!row?.referred_by || !row.email_verified) return;
  const referrerId = row.referred_by;
  await t`select pg_advisory_xact_lock(hashtext(${`referrals:${referrerId}`}))`;
  const [paid] = await t<{ n: number }[]>`
    select count(*)::int as n from credit_ledger
    where user_id = ${referrerId} and reason = 'referral' and reference like 'referred:%'`;
  if ((paid?.n ?? 0) >= REFERRALS_PAID_PER_REFERRER) return;
  await grantReferralCredits(t, userId, referrerId);
}

/** Credits both sides of a referral; the ledger's uniqueness makes a second call a no-op. */
export async function grantReferralCredits(
  t: postgres.TransactionSql,
  newUserId: string,
  referrerId: string,
): Promise<void> {
  const amount = REFERRAL_CREDITS * MICRO_USD_PER_CREDIT;
  const granted = await t`
    insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference)
    values (${`led_${randomUUID()}`}, ${newUserId}, ${amount}, 'referral', ${`referred-by:${referrerId}`}),
           (${`led_${randomUUID()}`}, ${referrerId}, ${amount}, 'referral', ${`referred:${newUserId}`})
    on conflict (user_id, reason, reference) do nothing
    returning user_id`;
  for (const row of granted) {
    await recordAudit(
      {
        action: "credits.changed",
        userId: row.user_id as string,
        target: row.user_id === newUserId ? referrerId : newUserId,
        details: { reason: "referral", amountMicroUsd: amount },
      },
      t,
    );
  }
}

/** The user's balance in credits (USD), to the micro-dollar. */
export async function creditBalance(userId: string): Promise<number> {
  const [row] = await db()<{ balance: number }[]>`
    select coalesce(sum(amount_micro_usd), 0)::bigint as balance
    from credit_ledger where user_id = ${userId}`;
  return (row?.balance ?? 0) / MICRO_USD_PER_CREDIT;
}

export interface CreditLedgerEntry {
  id: string;
  amountMicroUsd: number;
  reason: string;
  reference: string | null;
  createdAt: string;
}

/** The user's latest credit ledger rows, newest first (the operator console). */
export async function creditLedger(userId: string, limit = 50): Promise<CreditLedgerEntry[]> {
  const rows = await db()<
    {
      id: string;
      amount_micro_usd: number;
      reason: string;
      reference: string | null;
      created_at: Date;
    }[]
  >`
    select id, amount_micro_usd, reason, reference, created_at from credit_ledger
    where user_id = ${userId} order by created_at desc, id desc limit ${limit}`;
  return rows.map((r) => ({
    id: r.id,
    amountMicroUsd: Number(r.amount_micro_usd),
    reason: r.reason,
    reference: r.reference,
    createdAt: r.created_at.toISOString(),
  }));
}
