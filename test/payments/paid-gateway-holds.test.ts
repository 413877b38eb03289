import { decodePaymentRequiredHeader } from "@x402/core/http";
import type { SchemeNetworkClient } from "@x402/core/types";
import type { Address } from "viem";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as route from "../../app/routes/api.v1.gateway.ts";
import { createApiKey } from "../../app/server/accounts/api-keys.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { ESCROW_OWNER, ensureWallet } from "../../app/server/payments/wallets.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { balanceOf, configureAi, giveCredits } from "../ai/support.ts";
import { call } from "../helpers/api.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import { setNativeBalance } from "./fiat-token.ts";
import { payingFetch, payingScheme, setUpTestChain } from "./support.ts";

// The paid gateway's money paths (decision 0199): an x402 authorisation is reserved before the
// plugin runs, so one PAYMENT-SIGNATURE runs one call however many requests carry it; a
// completion is priced at the fee plus its tokens' worst case and metered per token.

const chain = setUpTestChain();
const openai = createOpenAiFake();
const FEE = 10_000;
const hello = { messages: [{ role: "user", content: "Say hello" }], model: "openai/gpt-4o" };

/** gpt-4o's worst case for `input` (see paid-gateway.test.ts): bytes + 8/message + 16, max_tokens. */
function worstCase(input: { messages: unknown[]; max_tokens?: number }): number {
  const body = { ...input, model: "openai/gpt-4o", max_tokens: input.max_tokens ?? 256 };
  const prompt = Buffer.byteLength(JSON.stringify(body)) + 8 * input.messages.length + 16;
  return Math.ceil(prompt * 2.5 + body.max_tokens * 10);
}
const TOKENS = 12 * 2.5 + 7 * 10; // the fake's usage at gpt-4o's prices

beforeAll(async () => {
  mswServer.use(...openai.handlers);
  await configureAi({ OPENAI_API_KEY: "test-key" });
  const escrow = (await ensureWallet(ESCROW_OWNER)).wallet.address;
  await setNativeBalance(chain.anvil, escrow, 10n ** 18n);
});
afterAll(async () => {
  await flushMetering();
});
beforeEach(() => {
  openai.state.calls = [];
  openai.state.failures = [];
  openai.state.gate = undefined;
});

const chatCalls = () => openai.state.calls.filter((c) => c.body !== undefined);
const action = (request: Request) =>
  route.action({
    request,
    params: {},
    context: { remoteAddress: "127.0.0.1" },
  }) as Promise<Response>;

/**
 * An @x402/fetch client of anvil account `index` whose paid request is handed to `paid` (the
 * unpaid one, which fetches the requirements, goes to the route as it is).
 */
function client(index: number, paid: (request: Request) => Promise<Response>) {
  const scheme: SchemeNetworkClient = payingScheme(chain, index);
  const fetchFn = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    return request.headers.has("payment-signature") ? paid(request) : action(request);
  }) as typeof fetch;
  return (body: unknown) =>
    payingFetch(
      chain,
      scheme,
      fetchFn,
    )("http://localhost/api/v1/gateway", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
}

/** Holds the provider's answers until `ready()`; then lets them through. */
function gateProvider() {
  let open = () => {};
  openai.state.gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  return open;
}

async function transfersOf(payer: Address) {
  return db()`select status from payment_transfers
    where purpose like ${`x402:${payer.toLowerCase()}:%`}`;
}

describe("x402: one authorisation, one call", () => {
  it("runs the plugin once and settles once for 5 concurrent requests with the same PAYMENT-SIGNATURE", async () => {
    const payer = chain.anvil.account(5).address;
    await chain.usdc.mint(payer, 1_000_000n);
    const before = await chain.balance(payer);
    const price = BigInt(FEE + worstCase(hello));
    const answers: Response[] = [];
    const open = gateProvider();
    const res = await client(5, async (request) => {
      const body = await request.text();
      const copies = Array.from({ length: 5 }, () =>
        action(new Request(request.url, { method: "POST", headers: request.headers, body })).then(
          (r) => {
            answers.push(r);
            return r;
          },
        ),
      );
      // Every request either reached the provider (held at the gate) or was answered: then the
      // provider answers. Without the reservation, all 5 reach it.
      await expect.poll(() => chatCalls().length + answers.length, { timeout: 20_000 }).toBe(5);
      open();
      const all = await Promise.all(copies);
      return all.find((r) => r.status === 200) ?? all[0]!;
    })({ plugin: "ai.completion", input: hello });

    expect(res.status, await res.clone().text()).toBe(200);
    expect(chatCalls()).toHaveLength(1);
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 402, 402, 402, 402]);
    for (const refused of answers.filter((r) => r.status === 402)) {
      expect(await refused.json()).toMatchObject({
        reason: "authorization_already_used",
        error: "Payment refused: this authorization was already used (replayed)",
      });
    }
    expect(await transfersOf(payer)).toEqual([{ status: "confirmed" }]);
    expect(await chain.balance(payer)).toBe(before - price);
    const reservations = await db()`select status, plugin from x402_reservations
      where payer = ${payer.toLowerCase()}`;
    expect(reservations).toEqual([{ status: "settled", plugin: "ai.completion" }]);
  });

  it("records a reservation whose plugin failed as failed and never runs that authorisation again", async () => {
    const payer = chain.anvil.account(6).address;
    await chain.usdc.mint(payer, 1_000_000n);
    const before = await chain.balance(payer);
    openai.state.failures = [401]; // the provider refuses the platform's key: no retry, no fallback
    let signature = "";
    const res = await client(6, (request) => {
      signature = request.headers.get("payment-signature")!;
      return action(request);
    })({ plugin: "ai.completion", input: hello });
    expect(res.status).toBe(502);
    expect(chatCalls()).toHaveLength(1);
    const [reservation] = await db()`select status, error from x402_reservations
      where payer = ${payer.toLowerCase()}`;
    expect(reservation?.status).toBe("failed");
    expect(reservation?.error).toMatch(/^plugin: /);

    const again = await call(route, "/api/v1/gateway", {
      method: "POST",
      body: { plugin: "ai.completion", input: hello },
      headers: { "payment-signature": signature },
    });
    expect(again.status).toBe(402);
    expect(again.json.reason).toBe("authorization_already_used");
    expect(chatCalls()).toHaveLength(1);
    expect(await chain.balance(payer)).toBe(before); // nothing was ever sent
    expect(await transfersOf(payer)).toEqual([]);
  });

  it("records a reservation whose settlement failed as failed, withholds the output and refuses the authorisation again", async () => {
    const payer = chain.anvil.account(7).address;
    await chain.usdc.mint(payer, 1_000_000n);
    let signature = "";
    const open = gateProvider();
    const res = await client(7, async (request) => {
      signature = request.headers.get("payment-signature")!;
      const answer = action(request);
      // Verified and running: the payer is blacklisted before it settles.
      await expect.poll(() => chatCalls().length, { timeout: 20_000 }).toBe(1);
      await chain.usdc.blacklist(payer);
      open();
      return answer;
    })({ plugin: "ai.completion", input: hello });
    await chain.usdc.unBlacklist(payer);
    expect(res.status).toBe(402);
    const body = await res.json();
    expect(body.output).toBeUndefined();
    const [reservation] = await db()`select status, error from x402_reservations
      where payer = ${payer.toLowerCase()}`;
    expect(reservation?.status).toBe("failed");
    expect(reservation?.error).toMatch(/^settlement: /);

    const again = await call(route, "/api/v1/gateway", {
      method: "POST",
      body: { plugin: "ai.completion", input: hello },
      headers: { "payment-signature": signature },
    });
    expect(again.status).toBe(402);
    expect(again.json.reason).toBe("authorization_already_used");
    expect(chatCalls()).toHaveLength(1);
  });
});

describe("ai.completion: priced at its worst case, metered per token", () => {
  it("asks an x402 payer for the fee plus the most the tokens can cost, and meters the call", async () => {
    await flushMetering();
    await db()`delete from ai_usage`; // the file's earlier calls
    const quoted = async (input: typeof hello & { max_tokens?: number }) => {
      const res = await call(route, "/api/v1/gateway", {
        method: "POST",
        body: { plugin: "ai.completion", input },
      });
      expect(res.status).toBe(402);
      return Number(
        decodePaymentRequiredHeader(res.headers.get("PAYMENT-REQUIRED")!).accepts[0]!.amount,
      );
    };
    expect(await quoted(hello)).toBe(FEE + worstCase(hello));
    const long = { ...hello, max_tokens: 1024 };
    expect(await quoted(long)).toBe(FEE + worstCase(long));
    const prompt = { ...hello, messages: [{ role: "user", content: "x".repeat(20_000) }] };
    expect(await quoted(prompt)).toBe(FEE + worstCase(prompt));
    expect(chatCalls()).toHaveLength(0);

    const payer = chain.anvil.account(8).address;
    await chain.usdc.mint(payer, 1_000_000n);
    const res = await client(8, action)({ plugin: "ai.completion", input: long });
    expect(res.status, await res.clone().text()).toBe(200);
    expect((await res.json()).payment.priceMicroUsd).toBe(FEE + worstCase(long));
    // The call ran as quoted: the quoted model and completion limit.
    expect(chatCalls()[0]?.body).toMatchObject({ model: "gpt-4o", max_tokens: 1024 });
    await flushMetering();
    const usage = await db()`select user_id, prompt_tokens, completion_tokens,
      cost_micro_usd::int as cost from ai_usage where endpoint = 'chat' and user_id is null`;
    expect(usage).toEqual([
      { user_id: null, prompt_tokens: 12, completion_tokens: 7, cost: TOKENS },
    ]);
  });

  it("holds a credits caller's tokens: credits that pay the fee but not the hold answer 402 and charge nothing", async () => {
    const user = "usr_gwhold";
    const credits = FEE + worstCase(hello) - 1; // one micro-USD short of fee + hold
    await giveCredits(user, credits);
    const { key } = await createApiKey(user, "gateway");
    const res = await call(route, "/api/v1/gateway", {
      method: "POST",
      body: { plugin: "ai.completion", input: hello },
      headers: { authorization: `Bearer ${key}` },
    });
    expect(res.status).toBe(402);
    expect(res.json.error).toBe("Insufficient credits for this request");
    expect(
      decodePaymentRequiredHeader(res.headers.get("PAYMENT-REQUIRED")!).accepts[0]!.amount,
    ).toBe(String(FEE + worstCase(hello)));
    expect(chatCalls()).toHaveLength(0);
    await flushMetering();
    expect(await balanceOf(user)).toBe(credits);

    await giveCredits(user, 1, "led_usr_gwhold_top_up");
    const paid = await call(route, "/api/v1/gateway", {
      method: "POST",
      body: { plugin: "ai.completion", input: hello },
      headers: { authorization: `Bearer ${key}` },
    });
    expect(paid.status, paid.text).toBe(200);
    await flushMetering();
    expect(await balanceOf(user)).toBe(credits + 1 - FEE - TOKENS);
  });
});
