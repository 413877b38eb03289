import { decodePaymentResponseHeader } from "@x402/core/http";
import type { Address, Hex } from "viem";
import { afterAll, beforeAll, expect, it } from "vitest";
import * as skillsRoute from "../../app/routes/api.skills.ts";
import * as gatewayRoute from "../../app/routes/api.v1.gateway.ts";
import { createApiKey } from "../../app/server/accounts/api-keys.server.ts";
import { flushRecords } from "../../app/server/agents/talk.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { ESCROW_OWNER, ensureWallet } from "../../app/server/payments/wallets.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { giveCredits } from "../ai/support.ts";
import { call } from "../helpers/api.ts";
import {
  type GatewayBench,
  provisionRealGateway,
  startGatewayBench,
  stopGatewayBench,
  userTexts,
} from "../helpers/real-gateway.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { describeDocker } from "../runtime/docker-support.ts";
import { ETH, payingFetch, payingScheme, routeModuleFetch, setUpTestChain } from "./support.ts";

// The paid gateway in front of a real agent (one real OpenClaw gateway for the file, set up as
// the skills and talk tests do): `agent.chat` paid by an API key's credits (exact debit) and by
// an x402 payment settled on anvil, and a marketplace skill as the plugin `skill:<name>`
// (decision 0174). The agent's model is the platform's AI endpoint answered by msw.

const chain = setUpTestChain();
const openai = createOpenAiFake();
const USER = "usr_gwreal_owner";
const AGENT = "agt_gwrealowner00000000";
const AGENT_PRICE = 20_000; // agent.chat and skill:* by default, micro-USD = USDC units
let bench: GatewayBench | undefined;
let key: string;
let escrow: Address;
const timings: Record<string, number> = {};

const gatewayCall = (body: unknown) =>
  call(gatewayRoute, "/api/v1/gateway", {
    method: "POST",
    body,
    headers: { authorization: `Bearer ${key}` },
  });
/** The credit-ledger rows the gateway wrote for the user (debits and refunds). */
const gatewayDebits = async () =>
  (
    await db()<{ reference: string; amount: number; reason: string }[]>`
      select reference, amount_micro_usd::int as amount, reason from credit_ledger
      where user_id = ${USER} and reason like 'gateway%' order by created_at`
  ).map((r) => ({ ...r }));
const timed = async <T>(label: string, fn: () => Promise<T>): Promise<T> => {
  const t0 = Date.now();
  try {
    return await fn();
  } finally {
    timings[label] = Date.now() - t0;
  }
};

describeDocker("paid gateway in front of a real agent", () => {
  beforeAll(async () => {
    // The model echoes what reached it, so each test can tell its own turn's reply.
    openai.state.replyFor = (body) => {
      // The session's earlier turns come first, and OpenClaw adds context messages of its own:
      // this turn's request is the last user text carrying a ping or a skill request.
      const last = userTexts(body).findLast((t) => /ping by \w+|User request:/.test(t)) ?? "";
      if (last.includes("- unit-converter (SKILL.md:")) return "SKILL-USED unit-converter";
      return `AGENT-REPLY ${/ping by \w+/.exec(last)?.[0] ?? "(no ping)"}`;
    };
    // A loaded shared machine has taken over 3 minutes to the gateway's first /healthz.
    process.env.GATEWAY_HEALTH_TIMEOUT_MS = "480000";
    bench = await startGatewayBench({ openai });
    await giveCredits(USER, 5_000_000);
    await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
      values (${AGENT}, ${USER}, 'Paid', 'main', 'openai/gpt-4o-mini', 'starter')`;
    timings.provisionMs = (await provisionRealGateway(USER)).provisionMs;
    ({ key } = await createApiKey(USER, "gateway"));
    escrow = (await ensureWallet(ESCROW_OWNER)).wallet.address;
    await chain.setNative(escrow, ETH);
  }, 600_000);

  afterAll(async () => {
    process.stdout.write(`paid gateway (real) timings ${JSON.stringify(timings)}\n`);
    await flushRecords();
    await flushMetering();
    await stopGatewayBench(bench);
    delete process.env.GATEWAY_HEALTH_TIMEOUT_MS;
  }, 240_000);

  it("runs agent.chat paid by the API key's credits: the agent's reply, exactly the price debited", async () => {
    const res = await timed("chatCreditsMs", () =>
      gatewayCall({ plugin: "agent.chat", input: { message: "ping by credits" } }),
    );
    expect(res.status, res.text).toBe(200);
    expect(res.json.output.reply).toBe("AGENT-REPLY ping by credits");
    expect(res.json.output.sessionId).toBeTruthy();
    expect(res.json.payment).toEqual({ method: "credits", priceMicroUsd: AGENT_PRICE });
    expect(await gatewayDebits()).toEqual([
      { reference: res.json.id, amount: -AGENT_PRICE, reason: "gateway" },
    ]);
  }, 240_000);

  it("runs an installed marketplace skill as skill:<name>; a skill the agent lacks is 404 and free", async () => {
    const installed = await call(skillsRoute, "/api/skills", {
      method: "POST",
      body: { action: "install", name: "unit-converter", agentId: AGENT },
      headers: { cookie: await sessionCookieFor(USER) },
    });
    expect(installed.status, installed.text).toBe(200);
    const before = await gatewayDebits();

    const res = await timed("skillCreditsMs", () =>
      gatewayCall({ plugin: "skill:unit-converter", input: { input: "3 miles in km?" } }),
    );
    expect(res.status, res.text).toBe(200);
    expect(res.json.output).toMatchObject({
      skill: "unit-converter",
      version: "1.0.0",
      agentId: AGENT,
      reply: "SKILL-USED unit-converter",
    });
    expect(res.json.payment).toEqual({ method: "credits", priceMicroUsd: AGENT_PRICE });
    expect(await gatewayDebits()).toEqual([
      ...before,
      { reference: res.json.id, amount: -AGENT_PRICE, reason: "gateway" },
    ]);

    const missing = await gatewayCall({ plugin: "skill:echo-skill", input: { input: "hi" } });
    expect(missing.status).toBe(404);
    expect(missing.json.error).toMatch(/not installed/);
    expect(await gatewayDebits()).toHaveLength(before.length + 1);
  }, 240_000);

  it("runs agent.chat paid by x402 when the credits do not cover it: settled on chain", async () => {
    // Leave less than the price: the credits path answers 402 with the x402 requirements.
    const [row] = await db()<{ b: number }[]>`
      select coalesce(sum(amount_micro_usd), 0)::int as b from credit_ledger where user_id = ${USER}`;
    await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference)
      values ('led_gwreal_spend', ${USER}, ${AGENT_PRICE - 1 - (row?.b ?? 0)}, 'test spend', 'led_gwreal_spend')`;
    const payer = chain.anvil.account(3).address;
    await chain.usdc.mint(payer, 50_000n);
    const [payerBefore, escrowBefore] = [await chain.balance(payer), await chain.balance(escrow)];
    const debitsBefore = await gatewayDebits();
    const sent: Headers[] = [];
    const pay = payingFetch(chain, payingScheme(chain, 3), routeModuleFetch(gatewayRoute, sent));
    const res = await timed("chatX402Ms", () =>
      pay("http://localhost/api/v1/gateway", {
        method: "POST",
        // The key names whose agent answers; the payment pays.
        headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
        body: JSON.stringify({ plugin: "agent.chat", input: { message: "ping by x402" } }),
      }),
    );
    const body = await res.json();
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(sent).toHaveLength(2); // 402 with the requirements, then the paid retry
    expect(body.output.reply).toBe("AGENT-REPLY ping by x402");
    expect(body.payment).toMatchObject({ method: "x402", amount: String(AGENT_PRICE), payer });
    const receipt = decodePaymentResponseHeader(res.headers.get("PAYMENT-RESPONSE")!);
    expect(receipt).toMatchObject({ success: true, payer });
    const mined = await chain.anvil.client.getTransactionReceipt({
      hash: receipt.transaction as Hex,
    });
    expect(mined.status).toBe("success");
    expect(await chain.balance(payer)).toBe(payerBefore - BigInt(AGENT_PRICE));
    expect(await chain.balance(escrow)).toBe(escrowBefore + BigInt(AGENT_PRICE));
    expect(await gatewayDebits()).toEqual(debitsBefore);
  }, 240_000);
});
