import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import * as modelsRoute from "../../app/routes/api.ai.v1.models.ts";
import { setDailyLimit, userStanding } from "../../app/server/ai/budgets.server.ts";
import { setUserKey, userKeyProviders } from "../../app/server/ai/byok.server.ts";
import { loadCatalog, resolveModel } from "../../app/server/ai/catalog.server.ts";
import { boundsFor } from "../../app/server/ai/completions.server.ts";
import {
  issueInstanceToken,
  revokeInstanceTokens,
} from "../../app/server/ai/instance-tokens.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { call } from "../helpers/api.ts";
import { createAnthropicFake } from "../msw/handlers/anthropic.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import { balanceOf, configureAi, giveCredits } from "./support.ts";

// The agents' model endpoint: per-instance token, OpenAI format, streaming, metering, credits,
// BYOK and budgets.

const openai = createOpenAiFake();
const anthropic = createAnthropicFake();
// A local OpenAI-compatible server (no key): its models cost nothing.
const LOCAL = "http://127.0.0.2:11434/v1";
const local = createOpenAiFake(LOCAL, { apiKey: "", models: ["llama3.2:3b"] });

beforeAll(() => {
  mswServer.use(...openai.handlers, ...anthropic.handlers, ...local.handlers);
});

let seq = 0;
let userId: string;
let token: string;

beforeEach(async () => {
  for (const f of [openai, anthropic, local]) {
    f.state.failures = [];
    f.state.calls = [];
    f.state.usage = { prompt: 12, completion: 7 };
    f.state.gate = undefined;
  }
  await configureAi({ OPENAI_API_KEY: "test-key", ANTHROPIC_API_KEY: "test-key" });
  seq += 1;
  userId = `usr_agent_${seq}`;
  token = await issueInstanceToken(userId, `ins_${seq}`);
  await giveCredits(userId, 1_000_000); // $1
});

const hello = [{ role: "user", content: "Say hello" }];
/** bearer "" sends no Authorization header. */
const complete = (body: unknown, bearer: string = token) =>
  call(completionsRoute, "/api/ai/v1/chat/completions", {
    method: "POST",
    body,
    headers: bearer ? { authorization: `Bearer ${bearer}` } : {},
  });

const chatCalls = (fake: typeof openai) => fake.state.calls.filter((c) => c.body !== undefined);

async function usageRows() {
  await flushMetering();
  return db()`select * from ai_usage where user_id = ${userId} order by created_at`;
}

describe("authentication by per-instance token", () => {
  it("answers 401 without a token, with an unknown one and with a revoked one", async () => {
    const none = await complete({ model: "openai/gpt-4o", messages: hello }, "");
    expect(none.status).toBe(401);
    expect(none.json).toEqual({ error: "Missing bearer token" });
    const wrong = await complete({ model: "openai/gpt-4o", messages: hello }, "ait_nope");
    expect(wrong.status).toBe(401);
    await revokeInstanceTokens(`ins_${seq}`);
    const revoked = await complete({ model: "openai/gpt-4o", messages: hello });
    expect(revoked.status).toBe(401);
    expect(revoked.json.error).toMatch(/revoked/);
  });

  it("stores only the token's hash", async () => {
    const rows = await db()`select token_hash from ai_instance_tokens where user_id = ${userId}`;
    expect(rows[0]?.token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(rows[0]?.token_hash).not.toContain(token);
  });

  it("lists models in OpenAI's format", async () => {
    const denied = await call(modelsRoute, "/api/ai/v1/models");
    expect(denied.status).toBe(401);
    const res = await call(modelsRoute, "/api/ai/v1/models", {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
    expect(res.json.object).toBe("list");
    expect(res.json.data).toContainEqual({
      id: "openai/gpt-4o",
      object: "model",
      created: 0,
      owned_by: "openai",
    });
  });
});

describe("POST /api/ai/v1/chat/completions", () => {
  it("carries x-overhead-ms on every answer, errors included", async () => {
    const overhead = (res: { headers: Headers }) => Number(res.headers.get("x-overhead-ms") ?? NaN);
    const answers = [
      await complete({ model: "openai/gpt-4o", messages: hello }), // 200
      await complete({ model: "openai/gpt-4o", messages: [] }), // 400: validation, in the builder
      await complete({ model: "openai/gpt-4o", messages: hello }, ""), // 401
      await complete({ model: "openai/gpt-4o", messages: hello }, "ait_revoked"), // 401
      await complete({ model: "nobody/no-model", messages: hello }), // 404
    ];
    expect(answers.map((r) => r.status)).toEqual([200, 400, 401, 401, 404]);
    for (const res of answers) expect(overhead(res)).toBeGreaterThanOrEqual(0);
    expect(answers[1]?.json).toEqual({ error: expect.stringContaining("messages") });
  });

  it("leaves the time spent waiting on providers out of a failure's x-overhead-ms", async () => {
    // Both attempts hang until the 300 ms provider timeout: at least 600 ms upstream.
    await configureAi({ OPENAI_API_KEY: "test-key", AI_TIMEOUT_MS: "300", AI_RETRIES: "1" });
    openai.state.failures = ["hang", "hang"];
    const res = await complete({ model: "openai/gpt-4o", messages: hello });
    expect(res.status).toBe(502);
    expect(res.json).toEqual({ error: expect.stringMatching(/AI provider error/) });
    const overhead = Number(res.headers.get("x-overhead-ms"));
    expect(overhead).toBeGreaterThanOrEqual(0);
    expect(overhead).toBeLessThan(300);
  });

  it("answers in OpenAI's format, meters the call and debits its exact cost", async () => {
    const res = await complete({ model: "openai/gpt-4o", messages: hello, max_tokens: 50 });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      object: "chat.completion",
      choices: [{ message: { role: "assistant", content: openai.state.reply } }],
    });
    expect(Number(res.headers.get("x-overhead-ms"))).toBeGreaterThanOrEqual(0);
    const [row] = await usageRows();
    expect(row).toMatchObject({
      user_id: userId,
      instance_id: `ins_${seq}`,
      endpoint: "agents",
      provider: "openai",
      model: "openai/gpt-4o",
      prompt_tokens: 12,
      completion_tokens: 7,
      cost_micro_usd: 100, // 12 × 2.5 + 7 × 10 micro-USD
      billing_mode: "credits",
      status: "ok",
      stream: false,
    });
    expect(await balanceOf(userId)).toBe(1_000_000 - 100);
    const standing = await userStanding(userId);
    expect(standing.held).toBe(0); // the reservation was settled
  });

  it("answers in OpenAI's format for an Anthropic model too", async () => {
    const res = await complete({
      model: "claude-3-5-haiku",
      messages: [{ role: "system", content: "Be brief." }, ...hello],
    });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      object: "chat.completion",
      usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
    });
    const [row] = await usageRows();
    // 12 × 0.8 + 7 × 4 = 37.6 micro-USD → 38
    expect(row).toMatchObject({ provider: "anthropic", cost_micro_usd: 38 });
  });

  it("streams OpenAI's events through as they come and meters them from the usage chunk", async () => {
    const res = await complete({ model: "openai/gpt-4o-mini", messages: hello, stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const events = res.text.split("\n\n").filter(Boolean);
    expect(events.at(-1)).toBe("data: [DONE]");
    const content = events
      .slice(0, -1)
      .map((e) => JSON.parse(e.slice(6)))
      .map((c) => c.choices[0]?.delta?.content ?? "")
      .join("");
    expect(content).toBe(openai.state.reply);
    const [row] = await usageRows();
    // 12 × 0.15 + 7 × 0.6 = 6 micro-USD
    expect(row).toMatchObject({ stream: true, prompt_tokens: 12, completion_tokens: 7 });
    expect(row?.cost_micro_usd).toBe(6);
    expect(await balanceOf(userId)).toBe(1_000_000 - 6);
  });

  it("translates an Anthropic stream into OpenAI chunks", async () => {
    const res = await complete({
      model: "anthropic/claude-sonnet-4",
      messages: hello,
      stream: true,
    });
    expect(res.status).toBe(200);
    const chunks = res.text
      .split("\n\n")
      .filter((e) => e && e !== "data: [DONE]")
      .map((e) => JSON.parse(e.slice(6)));
    expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true);
    expect(chunks.at(-1).usage).toEqual({
      prompt_tokens: 12,
      completion_tokens: 7,
      total_tokens: 19,
    });
    const [row] = await usageRows();
    expect(row).toMatchObject({ provider: "anthropic", cost_micro_usd: 141 }); // 36 + 105
  });

  it("counts tokens when the provider reports no usage", async () => {
    openai.state.usage = null;
    const res = await complete({ model: "openai/gpt-4o", messages: hello });
    expect(res.status).toBe(200);
    const [row] = await usageRows();
    expect(row?.tokens_estimated).toBe(true);
    expect(row?.prompt_tokens).toBe(3); // "Say hello": 9 characters ≈ 3 tokens
    expect(row?.completion_tokens).toBe(Math.ceil(openai.state.reply.length / 4));
  });

  it("passes extra OpenAI fields (tools, stop) through to OpenAI-compatible providers", async () => {
    const tools = [{ type: "function", function: { name: "now", parameters: { type: "object" } } }];
    const res = await complete({ model: "openai/gpt-4o", messages: hello, tools, stop: ["\n"] });
    expect(res.status).toBe(200);
    expect(openai.state.calls.at(-1)?.body).toMatchObject({ model: "gpt-4o", tools, stop: ["\n"] });
  });

  it("answers 400 for a body without messages and 404 for an unknown model", async () => {
    expect((await complete({ model: "openai/gpt-4o", messages: [] })).status).toBe(400);
    expect((await complete({ messages: hello })).status).toBe(400);
    const unknown = await complete({ model: "acme/x", messages: hello });
    expect(unknown.status).toBe(404);
  });
});

describe("credits, BYOK and budgets", () => {
  it("answers a user with no credits through a free local model, and charges nothing", async () => {
    await configureAi({ OPENAI_BASE_URL: LOCAL });
    const broke = "usr_broke_local";
    const brokeToken = await issueInstanceToken(broke, "ins_broke_local");
    const res = await complete(
      { model: "local/llama3.2:3b", messages: hello, max_tokens: 50 },
      brokeToken,
    );
    expect(res.status, res.text).toBe(200);
    expect(chatCalls(local)).toHaveLength(1);
    await flushMetering();
    expect(await balanceOf(broke)).toBe(0);
    const rows = await db()<{ cost: number }[]>`
      select cost_micro_usd::int as cost from ai_usage where user_id = ${broke}`;
    expect(rows).toEqual([{ cost: 0 }]);
  });

  it("answers 402 {error} when the user has no credits", async () => {
    const broke = "usr_broke";
    const brokeToken = await issueInstanceToken(broke, "ins_broke");
    const res = await complete({ model: "openai/gpt-4o", messages: hello }, brokeToken);
    expect(res.status).toBe(402);
    // Worded for the gateway: OpenClaw reads it as a passing limit, not billing (decision 0155).
    expect(res.json).toEqual({
      error: expect.stringMatching(/^Out of credits: the usage limit .* then try again\.$/),
    });
    expect(res.text).not.toMatch(/insufficient|credit balance|top up|payment required/i);
    expect(chatCalls(openai)).toHaveLength(0);
  });

  it("uses the user's own key in BYOK mode, records the usage and debits nothing", async () => {
    const byok = "usr_byok";
    const byokToken = await issueInstanceToken(byok, "ins_byok");
    await setUserKey(byok, "openai", "sk-user-own-key-123");
    expect(await userKeyProviders(byok)).toEqual([{ provider: "openai", keyPreview: "sk-u…-123" }]);
    const sealed = await db()`select sealed_key from ai_user_keys where user_id = ${byok}`;
    expect(sealed[0]?.sealed_key).not.toContain("sk-user-own-key-123");
    openai.state.apiKey = "sk-user-own-key-123";
    try {
      const res = await complete({ model: "openai/gpt-4o", messages: hello }, byokToken);
      expect(res.status).toBe(200);
    } finally {
      openai.state.apiKey = "test-key";
    }
    expect(openai.state.calls.at(-1)?.headers.get("authorization")).toBe(
      "Bearer sk-user-own-key-123",
    );
    await flushMetering();
    const [row] = await db()`select * from ai_usage where user_id = ${byok}`;
    expect(row).toMatchObject({ billing_mode: "byok", cost_micro_usd: 100 });
    expect(await balanceOf(byok)).toBe(0);
  });

  it("answers 402 once the daily spend limit is reached", async () => {
    // Each call holds its bound and costs 100 micro-USD: the limit lets one call through, and
    // with 100 spent the next call's hold no longer fits.
    const body = { model: "openai/gpt-4o", messages: hello, max_tokens: 5 };
    const { hold } = boundsFor(resolveModel(await loadCatalog(), body.model), body, 5);
    await setDailyLimit(userId, (hold + 50) / 1e6);
    expect(
      (await complete({ model: "openai/gpt-4o", messages: hello, max_tokens: 5 })).status,
    ).toBe(200);
    await flushMetering(); // 100 micro-USD spent today
    const res = await complete({ model: "openai/gpt-4o", messages: hello, max_tokens: 5 });
    expect(res.status).toBe(402);
    expect(res.json).toEqual({
      error: expect.stringMatching(/^Out of today's AI allowance: the daily usage limit of \$/),
      dailyLimitUsd: expect.any(Number),
    });
    expect(res.text).not.toMatch(/spend limit/i);
  });

  it("lets exactly 5 of 20 concurrent requests through on a balance that covers 5", async () => {
    const user = "usr_race";
    const raceToken = await issueInstanceToken(user, "ins_race");
    const body = { model: "openai/gpt-4o-mini", messages: hello, max_tokens: 100 };
    const bounds = boundsFor(resolveModel(await loadCatalog(), body.model), body, 100);
    const reserve = bounds.hold;
    expect(reserve).toBeGreaterThan(0);
    await giveCredits(user, 5 * reserve);
    // The provider reports the most an honest one can: each call costs exactly its hold.
    openai.state.usage = { prompt: bounds.promptTokens, completion: 100 };

    let release!: () => void;
    openai.state.gate = new Promise<void>((r) => {
      release = r;
    });
    const settled: number[] = [];
    const requests = Array.from({ length: 20 }, () =>
      complete(body, raceToken).then((r) => {
        settled.push(r.status);
        return r;
      }),
    );
    // The 5 admitted wait at the provider's gate; the 15 others wait for them to settle (their
    // unused holds could pay for more), and are refused once they did and nothing came back.
    await expect.poll(() => chatCalls(openai).length, { timeout: 20_000 }).toBe(5);
    expect(settled).toHaveLength(0);
    release();
    const results = await Promise.all(requests);
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 402)).toHaveLength(15);
    await flushMetering();
    const balance = await balanceOf(user);
    expect(balance).toBeGreaterThanOrEqual(0);
    expect(balance).toBe(0); // each call cost exactly its hold
    expect(chatCalls(openai)).toHaveLength(5);
    expect((await userStanding(user)).held).toBe(0);
  });
});
