import { db } from "../platform/db.server.ts";
import { settlementPurpose } from "./x402-facilitator.server.ts";

// An x402 authorisation reserved for one gateway call before its plugin runs (table
// x402_reservations): the insert on the authorisation's key is the one place concurrent
// requests carrying the same PAYMENT-SIGNATURE meet, so exactly one of them runs the plugin.
// A reservation is final: it ends settled or failed and is never taken again, so a plugin never
// runs twice on one authorisation (the payer signs a new one; a failed one was never sent).
// docs/decisions/0199-paid-gateway-holds-and-x402-reservations.md

export interface ReservedAuthorization {
  from: string;
  nonce: string;
  value: string;
}

/** Takes the authorisation for `callId`; false when any request took it before. */
export async function reserveAuthorization(
  auth: ReservedAuthorization,
  callId: string,
  plugin: string,
): Promise<boolean> {
  const rows = await db()`
    insert into x402_reservations (authorization_key, payer, call_id, plugin, amount)
    values (${settlementPurpose(auth)}, ${auth.from.toLowerCase()}, ${callId}, ${plugin},
      ${auth.value})
    on conflict (authorization_key) do nothing
    returning call_id`;
  return rows.length === 1;
}

/** The reservation paid: its settlement's hash. */
export async function markSettled(callId: string, transaction: string): Promise<void> {
  await db()`update x402_reservations
    set status = 'settled', transaction = ${transaction}, updated_at = now()
    where call_id = ${callId} and status = 'reserved'`;
}

/** The plugin or the settlement failed: recorded, and the authorisation stays spent. */
export async function markFailed(callId: string, error: string): Promise<void> {
  await db()`update x402_reservations
    set status = 'failed', error = ${error.slice(0, 500)}, updated_at = now()
    where call_id = ${callId} and status = 'reserved'`;
}
