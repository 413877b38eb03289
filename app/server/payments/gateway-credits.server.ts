import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";

// Paying a gateway call with platform credits: one credit_ledger row per call (the ledger the AI
// layer and billing write; its trigger keeps ai_accounts.balance in step), written only when the
// balance, less what the AI layer holds for calls in flight, covers the price. The account row
// is locked by the check, so concurrent calls can never spend more than the balance.
// docs/decisions/0128-paid-plugin-gateway.md

/** Debits `priceMicroUsd` for call `callId`, or answers 402 when the credits do not cover it. */
export async function chargeCredits(
  userId: string,
  priceMicroUsd: number,
  callId: string,
  plugin: string,
): Promise<void> {
  const rows = await db()`
    with acct as (
      select user_id from ai_accounts
      where user_id = ${userId} and balance_micro_usd - held_micro_usd >= ${priceMicroUsd}
      for update
    )
    insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference, note)
    select ${`led_${callId}`}, user_id, ${-priceMicroUsd}, 'gateway', ${callId}, ${plugin}
    from acct
    returning id`;
  if (rows.length === 0) {
    throw new DomainError(402, "Insufficient credits for this call", {
      priceMicroUsd,
    });
  }
}

/** Gives a call's debit back when the plugin could not serve it (once per call). */
export async function refundCredits(
  userId: string,
  priceMicroUsd: number,
  callId: string,
  plugin: string,
): Promise<void> {
  await db()`
    insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference, note)
    values (${`led_${callId}_refund`}, ${userId}, ${priceMicroUsd}, 'gateway-refund', ${callId},
      ${plugin})
    on conflict (user_id, reason, reference) do nothing`;
}
