import { randomUUID } from "node:crypto";
import {
  decodePaymentSignatureHeader,
  encodePaymentRequiredHeader,
  encodePaymentResponseHeader,
} from "@x402/core/http";
import { PaymentPayloadV2Schema } from "@x402/core/schemas";
import type { PaymentPayload, PaymentRequired, PaymentRequirements } from "@x402/core/types";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { json } from "../platform/http.server.ts";
import { logger } from "../platform/logger.server.ts";
import { chargeCredits, refundCredits } from "./gateway-credits.server.ts";
import { needsAccount, parsePluginInput, preparePlugin } from "./gateway-plugins.server.ts";
import { type GatewayPlugin, pluginPrice } from "./plugin-prices.server.ts";
import { nativeBalance } from "./token.server.ts";
import { ESCROW_OWNER, ensureWallet } from "./wallets.server.ts";
import {
  alreadySettled,
  authorizationOf,
  paymentRequirements,
  settlePayment,
  verifyPayment,
} from "./x402-facilitator.server.ts";
import { markFailed, markSettled, reserveAuthorization } from "./x402-reservations.server.ts";

// POST /api/v1/gateway: routes `{plugin, input}` to a plugin and charges its price per call,
// paid by the caller's credits (API key or session) or by an x402 v2 payment (PAYMENT-SIGNATURE
// header). Without either: 402 with the payment requirements. An x402 payment is verified and
// then reserved (one call per authorisation, however many requests carry it) before the plugin
// runs, and settled on chain after it answered; the answer carries the settlement receipt
// (PAYMENT-RESPONSE). A completion's tokens are metered to the caller's credits, or included in
// the x402 price at their worst case. docs/decisions/0128-paid-plugin-gateway.md, 0199

export const PAYMENT_HEADER = "payment-signature";
export const REQUIRED_HEADER = "PAYMENT-REQUIRED";
export const RESPONSE_HEADER = "PAYMENT-RESPONSE";

export interface GatewayRequest {
  plugin: GatewayPlugin;
  input?: unknown;
}

export interface GatewayCaller {
  userId: string | null;
}

/** Why a payment was refused, in words, for the x402 reason codes a payer can cause. */
const REASONS: Record<string, string> = {
  authorization_already_used: "this authorization was already used (replayed)",
  invalid_exact_evm_nonce_already_used: "this authorization was already used (replayed)",
  invalid_exact_evm_payload_authorization_valid_before: "the authorization has expired",
  invalid_exact_evm_payload_authorization_valid_after: "the authorization is not valid yet",
  invalid_exact_evm_payload_authorization_value_mismatch:
    "the authorization's amount is not the price",
  underpaid: "the authorization pays less than the price",
  invalid_exact_evm_recipient_mismatch: "the authorization pays someone other than the platform",
  invalid_exact_evm_signature: "the signature does not match the authorization",
  invalid_exact_evm_network_mismatch: "the payment is for another network",
  invalid_exact_evm_insufficient_balance: "the payer's balance does not cover the price",
  asset_mismatch: "the payment is in another token",
  invalid_payload: "the payment header is not an x402 v2 exact EIP-3009 payment",
};

const describe = (reason: string | undefined) =>
  (reason && REASONS[reason]) ?? `the payment could not be verified (${reason ?? "unknown"})`;

function paymentRequired(
  request: Request,
  plugin: GatewayPlugin,
  requirements: PaymentRequirements,
  error: string,
  reason?: string,
): Response {
  const body: PaymentRequired = {
    x402Version: 2,
    error,
    resource: {
      url: new URL(request.url).toString(),
      description: `One call of the ${plugin} plugin`,
      mimeType: "application/json",
    },
    accepts: [requirements],
  };
  return json(
    { ...body, error, ...(reason ? { reason } : {}) },
    { status: 402, headers: { [REQUIRED_HEADER]: encodePaymentRequiredHeader(body) } },
  );
}

function parsePayment(header: string): PaymentPayload | undefined {
  try {
    const parsed = PaymentPayloadV2Schema.safeParse(decodePaymentSignatureHeader(header));
    return parsed.success ? (parsed.data as PaymentPayload) : undefined;
  } catch {
    return undefined;
  }
}

async function recordCall(row: {
  id: string;
  plugin: GatewayPlugin;
  payment: "credits" | "x402";
  userId: string | null;
  payer?: string;
  price: number;
  amount?: string;
  transaction?: string;
}): Promise<void> {
  await db()`insert into gateway_calls
      (id, plugin, payment, user_id, payer, price_micro_usd, amount, transaction)
    values (${row.id}, ${row.plugin}, ${row.payment}, ${row.userId}, ${row.payer ?? null},
      ${row.price}, ${row.amount ?? null}, ${row.transaction ?? null})`;
}

/** One gateway call: price, credential, plugin, charge; the Response to send. */
export async function gatewayCall(
  request: Request,
  caller: GatewayCaller,
  body: GatewayRequest,
  startedAt: number,
): Promise<Response> {
  const fee = await pluginPrice(body.plugin);
  const input = parsePluginInput(body.plugin, body.input);
  if (needsAccount(body.plugin) && !caller.userId) {
    throw new DomainError(401, `${body.plugin} needs your API key: it acts on your own agent`);
  }
  const callId = `gwc_${randomUUID()}`;
  const ctx = { userId: caller.userId, signal: request.signal, startedAt };
  const header = request.headers.get(PAYMENT_HEADER);
  // Nobody pays for a call that cannot run (a skill the caller's agent does not have: 404).
  const prepared = await preparePlugin(body.plugin, input, ctx);
  // Paid up front, the price covers the call's own model tokens at their worst case.
  const price = fee + prepared.maxUsageMicroUsd;

  if (!header && caller.userId) {
    const userId = caller.userId;
    // Credits that do not cover the call leave the machine payment: the 402 carries its
    // requirements, so an x402 client pays (its API key still names the caller's agent).
    const offerX402 = (error: DomainError) =>
      paymentRequirements(price).then(
        (requirements) => paymentRequired(request, body.plugin, requirements, error.message),
        () => Promise.reject(error),
      );
    try {
      await chargeCredits(userId, fee, callId, body.plugin);
    } catch (error) {
      if (!(error instanceof DomainError) || error.status !== 402) throw error;
      return offerX402(error);
    }
    let output: Record<string, unknown>;
    try {
      // The plugin's tokens are held from and metered to the same credits.
      output = await prepared.run(userId);
    } catch (error) {
      await refundCredits(userId, fee, callId, body.plugin);
      if (error instanceof DomainError && error.status === 402) return offerX402(error);
      throw error;
    }
    await recordCall({
      id: callId,
      plugin: body.plugin,
      payment: "credits",
      userId,
      price: fee,
    });
    return json({
      id: callId,
      plugin: body.plugin,
      output,
      payment: { method: "credits", priceMicroUsd: fee },
    });
  }

  const requirements = await paymentRequirements(price);
  if (!header) {
    return paymentRequired(
      request,
      body.plugin,
      requirements,
      "Payment required: send an x402 payment (PAYMENT-SIGNATURE) or an API key with credits",
    );
  }
  const refuse = (reason: string) =>
    paymentRequired(
      request,
      body.plugin,
      requirements,
      `Payment refused: ${describe(reason)}`,
      reason,
    );

  const payload = parsePayment(header);
  const auth = payload && authorizationOf(payload);
  if (!payload || !auth) return refuse("invalid_payload");
  if (payload.accepted.asset.toLowerCase() !== requirements.asset.toLowerCase()) {
    return refuse("asset_mismatch");
  }
  if (BigInt(auth.value) < BigInt(requirements.amount)) return refuse("underpaid");
  if (await alreadySettled(auth)) return refuse("authorization_already_used");
  const verified = await verifyPayment(payload, requirements);
  if (!verified.isValid) return refuse(verified.invalidReason ?? "invalid_payload");
  const { wallet: escrow } = await ensureWallet(ESCROW_OWNER);
  if ((await nativeBalance(escrow.address)) === 0n) {
    // The platform's shortfall, not the payer's: nothing was charged.
    throw new DomainError(503, "The platform cannot settle payments right now (no gas)");
  }

  // One call per authorisation: of the requests carrying it, the one whose reservation wins
  // runs the plugin; the others are refused as replays before anything runs.
  if (!(await reserveAuthorization(auth, callId, body.plugin))) {
    return refuse("authorization_already_used");
  }
  // The plugin runs first, so a call that fails costs the payer nothing (the authorisation
  // is never submitted); a payment that then fails to settle gets no output. Either way the
  // reservation ends failed: the authorisation never runs a plugin again.
  let output: Record<string, unknown>;
  let settled: Awaited<ReturnType<typeof settlePayment>>;
  try {
    output = await prepared.run(null);
  } catch (error) {
    await markFailed(callId, `plugin: ${(error as Error).message}`);
    throw error;
  }
  try {
    settled = await settlePayment(payload, requirements);
  } catch (error) {
    await markFailed(callId, `settlement: ${(error as Error).message}`);
    throw error;
  }
  if (!settled.success) {
    logger().warn({ reason: settled.errorReason, payer: auth.from }, "x402 settlement failed");
    await markFailed(callId, `settlement: ${settled.errorReason ?? "unknown"}`);
    return refuse(settled.errorReason ?? "invalid_payload");
  }
  await markSettled(callId, settled.transaction);
  await recordCall({
    id: callId,
    plugin: body.plugin,
    payment: "x402",
    userId: caller.userId,
    payer: auth.from,
    price,
    amount: auth.value,
    transaction: settled.transaction,
  });
  return json(
    {
      id: callId,
      plugin: body.plugin,
      output,
      payment: {
        method: "x402",
        priceMicroUsd: price,
        amount: auth.value,
        asset: requirements.asset,
        network: settled.network,
        payer: settled.payer ?? auth.from,
        transaction: settled.transaction,
      },
    },
    { headers: { [RESPONSE_HEADER]: encodePaymentResponseHeader(settled) } },
  );
}
