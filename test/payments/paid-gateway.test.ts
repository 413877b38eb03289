import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from "@x402/core/http";
import type { PaymentRequirements, SchemeNetworkClient } from "@x402/core/types";
import type { Address, Hex } from "viem";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as route from "../../app/routes/api.v1.gateway.ts";
import { createApiKey } from "../../app/server/accounts/api-keys.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import {
  listPluginPrices,
  pluginPrice,
  setPluginPrice,
} from "../../app/server/payments/plugin-prices.server.ts";
import { ESCROW_OWNER, ensureWallet } from "../../app/server/payments/wallets.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { balanceOf, configureAi, giveCredits } from "../ai/support.ts";
import { call } from "../helpers/api.ts";
import { openApiPaths } from "../helpers/openapi.ts";
import type { Anvil } from "../identity/anvil.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import { type FiatToken, setNativeBalance } from "./fiat-token.ts";
import { payingFetch, payingScheme, routeModuleFetch, setUpTestChain } from "./support.ts";

const chain = setUpTestChain();
let anvil: Anvil;
let usdc: FiatToken;
let escrow: Address;
const openai = createOpenAiFake();
const FEE = 10_000; // ai.completion's row: 0.01 USD a call
const hello = { messages: [{ role: "user", content: "Say hello" }], model: "openai/gpt-4o" };
/**
 * The most a completion of `input` can cost (decision 0199): gpt-4o at OpenAI costs 2.5 micro-USD
 * a prompt token and 10 a completion token; the prompt is bounded by the request's bytes plus 8
 * a message and 16 a request, the completion by max_tokens (256 when the input sets none).
 */
function worstCase(input: { messages: unknown[]; max_tokens?: number }): number {
  const body = { ...input, model: "openai/gpt-4o", max_tokens: input.max_tokens ?? 256 };
  const prompt = Buffer.byteLength(JSON.stringify(body)) + 8 * input.messages.length + 16;
  return Math.ceil(prompt * 2.5 + body.max_tokens * 10);
}
/** What an x402 payment for one completion of `hello` is: the fee and the tokens' worst case. */
const PRICE = BigInt(FEE + worstCase(hello)); // units of a 6-decimal token = micro-USD
/** What the fake provider's answer (12 prompt and 7 completion tokens) costs at gpt-4o's prices. */
const TOKENS = 12 * 2.5 + 7 * 10;

beforeAll(async () => {
  mswServer.use(...openai.handlers);
  ({ anvil, usdc } = chain);
  await configureAi({ OPENAI_API_KEY: "test-key" });
  escrow = (await ensureWallet(ESCROW_OWNER)).wallet.address;
  await setNativeBalance(anvil, escrow, 10n ** 18n);
});
afterAll(async () => {
  await flushMetering();
});
beforeEach(() => {
  openai.state.calls = [];
});

const balance = (address: Address) => chain.balance(address);
/** Completions the provider was asked for (the catalog's listing is not one). */
const chatCalls = () => openai.state.calls.filter((c) => c.body !== undefined);

const routeFetch = (sent: Headers[], remoteAddress = "127.0.0.1") =>
  routeModuleFetch(route, sent, remoteAddress);
const payerScheme = (index: number, tamper?: (r: PaymentRequirements) => PaymentRequirements) =>
  payingScheme(chain, index, tamper);
const x402Fetch = (scheme: SchemeNetworkClient, sent: Headers[]) =>
  payingFetch(chain, scheme, routeFetch(sent));

const post = (f: (i: string, init: RequestInit) => Promise<Response>, body: unknown) =>
  f("http://localhost/api/v1/gateway", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

describe("POST /api/v1/gateway, paid by x402", () => {
  it("answers 402 with x402 v2 payment requirements when no credential is sent", async () => {
    const res = await call(route, "/api/v1/gateway", {
      method: "POST",
      body: { plugin: "ai.completion", input: hello },
    });
    expect(res.status).toBe(402);
    expect(res.json.error).toMatch(/Payment required/);
    const required = decodePaymentRequiredHeader(res.headers.get("PAYMENT-REQUIRED")!);
    expect(required).toMatchObject({ x402Version: 2 });
    expect(required.accepts).toEqual([
      {
        scheme: "exact",
        network: "eip155:8453",
        amount: PRICE.toString(),
        asset: usdc.address,
        payTo: escrow,
        maxTimeoutSeconds: 300,
        extra: { name: "USD Coin", version: "2" },
      },
    ]);
    expect(res.json.accepts).toEqual(required.accepts);
    expect(chatCalls()).toHaveLength(0);
  });

  it("accepts a payment from an @x402/fetch client, settles it on chain and refuses its replay", async () => {
    const payer = anvil.account(3).address;
    await usdc.mint(payer, 50_000n);
    const [payerBefore, escrowBefore] = [await balance(payer), await balance(escrow)];
    const sent: Headers[] = [];
    const res = await post(x402Fetch(payerScheme(3), sent), {
      plugin: "ai.completion",
      input: hello,
    });
    const body = await res.json();
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.output.content).toBeTruthy();
    expect(body.payment).toMatchObject({
      method: "x402",
      priceMicroUsd: Number(PRICE),
      amount: PRICE.toString(),
      payer,
    });
    const receipt = decodePaymentResponseHeader(res.headers.get("PAYMENT-RESPONSE")!);
    expect(receipt).toMatchObject({ success: true, network: "eip155:8453", payer });
    expect(receipt.transaction).toBe(body.payment.transaction);
    const mined = await anvil.client.getTransactionReceipt({ hash: receipt.transaction as Hex });
    expect(mined.status).toBe("success");
    expect(mined.from.toLowerCase()).toBe(escrow.toLowerCase()); // the platform paid the gas
    expect(await balance(payer)).toBe(payerBefore - PRICE);
    expect(await balance(escrow)).toBe(escrowBefore + PRICE);
    const [ledger] = await db()`select status, tx_hash from payment_transfers
      where purpose like ${`x402:${payer.toLowerCase()}:%`}`;
    expect(ledger).toMatchObject({ status: "confirmed", tx_hash: receipt.transaction });
    const [calls] = await db()`select count(*)::int as n from gateway_calls where payer = ${payer}`;
    expect(calls!.n).toBe(1);

    // The same PAYMENT-SIGNATURE again: refused, nothing moves, the plugin does not run.
    const signature = sent.find((h) => h.has("payment-signature"))!.get("payment-signature")!;
    const providerCalls = chatCalls().length;
    const replay = await call(route, "/api/v1/gateway", {
      method: "POST",
      body: { plugin: "ai.completion", input: hello },
      headers: { "payment-signature": signature },
    });
    expect(replay.status).toBe(402);
    expect(replay.json).toMatchObject({ reason: "authorization_already_used" });
    expect(replay.json.error).toMatch(/already used/);
    expect(chatCalls().length).toBe(providerCalls);
    expect(await balance(payer)).toBe(payerBefore - PRICE);
  });

  it.each([
    [
      "underpaid",
      (r: PaymentRequirements) => ({ ...r, amount: (BigInt(r.amount) - 1n).toString() }),
      "underpaid",
      /pays less/,
    ],
    [
      "expired",
      (r: PaymentRequirements) => ({ ...r, maxTimeoutSeconds: 1 }),
      "invalid_exact_evm_payload_authorization_valid_before",
      /expired/,
    ],
    [
      "addressed to someone else",
      (r: PaymentRequirements) => ({ ...r, payTo: anvil.account(9).address }),
      "invalid_exact_evm_recipient_mismatch",
      /someone other/,
    ],
  ])(
    "refuses an authorisation that is %s with 402 and its reason",
    async (_, tamper, reason, message) => {
      const payer = anvil.account(4).address;
      await usdc.mint(payer, 50_000n);
      const before = await balance(payer);
      const res = await post(x402Fetch(payerScheme(4, tamper), []), {
        plugin: "ai.completion",
        input: hello,
      });
      const body = await res.json();
      expect(res.status).toBe(402);
      expect(body.reason).toBe(reason);
      expect(body.error).toMatch(message);
      expect(res.headers.get("PAYMENT-REQUIRED")).toBeTruthy();
      expect(chatCalls()).toHaveLength(0);
      expect(await balance(payer)).toBe(before);
    },
  );
});

describe("POST /api/v1/gateway, paid by credits", () => {
  it("debits the fee and the metered tokens per call and answers 402 when the credits run out", async () => {
    const user = "usr_gwcredits";
    await giveCredits(user, 25_000);
    const { key } = await createApiKey(user, "gateway");
    const headers = { authorization: `Bearer ${key}` };
    const paid = () =>
      call(route, "/api/v1/gateway", {
        method: "POST",
        body: { plugin: "ai.completion", input: hello },
        headers,
      });
    for (const left of [25_000 - FEE - TOKENS, 25_000 - 2 * (FEE + TOKENS)]) {
      const res = await paid();
      expect(res.status, res.text).toBe(200);
      expect(res.json.payment).toEqual({ method: "credits", priceMicroUsd: FEE });
      expect(res.json.output.content).toBeTruthy();
      await flushMetering();
      expect(await balanceOf(user)).toBe(left);
    }
    const refused = await paid();
    expect(refused.status).toBe(402);
    expect(refused.json.error).toBe("Insufficient credits for this call");
    expect(await balanceOf(user)).toBe(25_000 - 2 * (FEE + TOKENS));
    const rows = await db()`select amount_micro_usd::int as a from credit_ledger
      where user_id = ${user} and reason = 'gateway'`;
    expect(rows.map((r) => r.a)).toEqual([-FEE, -FEE]);
    // The tokens went through the AI layer: held, then metered per token to the caller.
    const usage = await db()`select prompt_tokens, completion_tokens, cost_micro_usd::int as cost,
      billing_mode from ai_usage where user_id = ${user}`;
    expect(usage).toEqual([
      { prompt_tokens: 12, completion_tokens: 7, cost: TOKENS, billing_mode: "credits" },
      { prompt_tokens: 12, completion_tokens: 7, cost: TOKENS, billing_mode: "credits" },
    ]);
  });

  it("charges the price operators set, and audits the change", async () => {
    await setPluginPrice("ai.completion", 12_345, { type: "operator", id: "usr_op" });
    const res = await call(route, "/api/v1/gateway", {
      method: "POST",
      body: { plugin: "ai.completion", input: hello },
    });
    expect(
      decodePaymentRequiredHeader(res.headers.get("PAYMENT-REQUIRED")!).accepts[0]!.amount,
    ).toBe(String(12_345 + worstCase(hello)));
    const [entry] = await db()`select actor_id, target, details from audit_log
      where action = 'gateway.price_changed'`;
    expect(entry).toMatchObject({ actor_id: "usr_op", target: "ai.completion" });
    expect(entry!.details).toMatchObject({ priceMicroUsd: 12_345, previousMicroUsd: 10_000 });
    await expect(
      setPluginPrice("ai.completion", 0, { type: "operator", id: "usr_op" }),
    ).rejects.toThrow(/priceMicroUsd/);
    await setPluginPrice("ai.completion", 10_000, { type: "operator", id: "usr_op" });
  });

  it("refuses bad input with 400 and an unknown plugin with 400, agent chat without a key with 401", async () => {
    const bad = await call(route, "/api/v1/gateway", {
      method: "POST",
      body: { plugin: "ai.completion", input: { messages: [] } },
    });
    expect(bad).toMatchObject({
      status: 400,
      json: { error: "input.messages: must not be empty" },
    });
    const unknown = await call(route, "/api/v1/gateway", {
      method: "POST",
      body: { plugin: "nope", input: {} },
    });
    expect(unknown.status).toBe(400);
    const chat = await call(route, "/api/v1/gateway", {
      method: "POST",
      body: { plugin: "agent.chat", input: { message: "hi" } },
    });
    expect(chat.status).toBe(401);
  });

  it("routes skill:<name>: 401 without a key, 404 (nothing charged) for a skill the caller cannot use, priced per skill", async () => {
    const skillCall = (plugin: string, headers: Record<string, string> = {}) =>
      call(route, "/api/v1/gateway", {
        method: "POST",
        body: { plugin, input: { input: "Convert 3 miles to km" } },
        headers,
      });
    expect((await skillCall("skill:unit-converter")).status).toBe(401);
    for (const plugin of ["skill:", "skill:two words", "skills:unit-converter"]) {
      expect((await skillCall(plugin)).status, plugin).toBe(400);
    }
    const user = "usr_gwskills";
    await giveCredits(user, 100_000);
    const { key } = await createApiKey(user, "gateway");
    const headers = { authorization: `Bearer ${key}` };
    // No agent, so no skill this caller can use: 404 before anything is charged.
    const missing = await skillCall("skill:unit-converter", headers);
    expect(missing.status).toBe(404);
    const badInput = await call(route, "/api/v1/gateway", {
      method: "POST",
      body: { plugin: "skill:unit-converter", input: { text: "x" } },
      headers,
    });
    expect(badInput.status).toBe(400);
    expect(badInput.json.error).toMatch(/^input\./);
    await flushMetering();
    expect(await balanceOf(user)).toBe(100_000);
    expect(
      (await db()`select 1 from credit_ledger where user_id = ${user} and reason like 'gateway%'`)
        .length,
    ).toBe(0);

    // Every skill costs skill:* until an operator prices it (or switches it off) by name.
    const op = { type: "operator" as const, id: "usr_op" };
    const priceOf = async (plugin: string) => {
      const res = await skillCall(plugin);
      return res.status === 401 ? null : res.status;
    };
    expect(await pluginPrice("skill:anything")).toBe(20_000);
    await setPluginPrice("skill:special", 5_000, op);
    expect(await pluginPrice("skill:special")).toBe(5_000);
    expect(await pluginPrice("skill:anything")).toBe(20_000);
    await setPluginPrice("skill:special", 5_000, op, false);
    await expect(pluginPrice("skill:special")).rejects.toThrow(/not available/);
    expect(await priceOf("skill:special")).toBe(404);
    await setPluginPrice("skill:*", 20_000, op, false);
    await expect(pluginPrice("skill:anything")).rejects.toThrow(/not available/);
    await setPluginPrice("skill:*", 20_000, op);
    await expect(setPluginPrice("skill:bad name", 1, op)).rejects.toThrow(/plugin/);
    const listed = (await listPluginPrices()).map((p) => p.plugin);
    expect(listed).toEqual(["agent.chat", "ai.completion", "skill:*", "skill:special"]);
  });

  it("allows 100 calls a minute per caller, then 429", async () => {
    const at = (n: number) =>
      call(route, "/api/v1/gateway", { method: "POST", body: {}, remoteAddress: "10.9.9.9" }).then(
        (r) => [n, r.status],
      );
    const statuses = [];
    for (let i = 1; i <= 100; i++) statuses.push(await at(i));
    expect(statuses.every(([, s]) => s === 400)).toBe(true);
    const over = await call(route, "/api/v1/gateway", {
      method: "POST",
      body: {},
      remoteAddress: "10.9.9.9",
    });
    expect(over.status).toBe(429);
    expect(over.json.error).toMatch(/100 per 60 seconds/);
    const other = await call(route, "/api/v1/gateway", {
      method: "POST",
      body: {},
      remoteAddress: "10.9.9.10",
    });
    expect(other.status).toBe(400);
  });

  it("is in the OpenAPI document", () => {
    const paths = openApiPaths({ "api/v1/gateway": route });
    expect(paths["/api/v1/gateway"]?.post?.summary).toMatch(/x402/);
  });
});
