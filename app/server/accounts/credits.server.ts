import type postgres from "postgres";
import { db } from "../platform/db.server.ts";

// Credits are integer platform credits (the unit of the contract's credit packs), kept as a
// ledger: the balance is the sum of a user's rows. docs/decisions/0013-referrals-and-credits.md

/** What a referral is worth, to the new user and to the referrer each. */
export const REFERRAL_CREDITS = 5;

/** Credits both sides of a referral; the ledger's uniqueness makes a second call a no-op. */
export async function grantReferralCredits(
  t: postgres.TransactionSql,
  newUserId: string,
  referrerId: string,
): Promise<void> {
  await t`
    insert into credits_ledger (user_id, amount, reason, reference)
    values (${newUserId}, ${REFERRAL_CREDITS}, 'referral', ${`referred-by:${referrerId}`}),
           (${referrerId}, ${REFERRAL_CREDITS}, 'referral', ${`referred:${newUserId}`})
    on conflict (user_id, reason, reference) do nothing`;
}

export async function creditBalance(userId: string): Promise<number> {
  const [row] = await db()<{ balance: number }[]>`
    select coalesce(sum(amount), 0)::int as balance from credits_ledger where user_id = ${userId}`;
  return row?.balance ?? 0;
}
