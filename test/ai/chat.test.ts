import { beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import * as chatRoute from "../../app/routes/api.ai.chat.ts";
import { isCoolingDown } from "../../app/server/ai/cooldown.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { newUser, type TestUser } from "../accounts/helpers.ts";
import { call } from "../helpers/api.ts";
import { createAnthropicFake } from "../msw/handlers/anthropic.ts";
import { createGoogleFake } from "../msw/handlers/google.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { createOpenRouterFake } from "../msw/handlers/openrouter.ts";
import { mswServer } from "../msw/server.ts";
import { allProviders, configureAi } from "./support.ts";

const openai = createOpenAiFake();
const anthropic = createAnthropicFake();
const google = createGoogleFake();
const openrouter = createOpenRouterFake();
const fakes = [openai, anthropic, google, openrouter];

let caller: TestUser;

beforeAll(async () => {
  mswServer.use(...fakes.flatMap((f) => f.handlers));
  caller = await newUser();
  // Ten dollars of platform credit for the signed-in caller.
  await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference)
    values ('led_chat_test', ${caller.id}, 10000000, 'purchase', 'chat-test')`;
});

beforeEach(async () => {
  for (const f of fakes) {
    f.state.failures = [];
    f.state.calls = [];
  }
  await configureAi({ ...allProviders, AI_RETRIES: "1", AI_COOLDOWN_FAILURES: "2" });
});

const chat = (body: unknown, headers?: Record<string, string>) =>
  call(chatRoute, "/api/ai/chat", {
    method: "POST",
    body,
    headers: { cookie: caller.cookie, ...headers },
  });
const hello = [{ role: "user", content: "Say hello" }];
const chatCalls = (fake: (typeof fakes)[number]) =>
  fake.state.calls.filter((c) => c.body !== undefined).length;

describe("POST /api/ai/chat", () => {
  it("requires an API key or a session: 401 without either", async () => {
    const res = await call(chatRoute, "/api/ai/chat", {
      method: "POST",
      body: { messages: hello, model: "openai/gpt-4o" },
    });
    expect(res.status).toBe(401);
    expect(res.json.error).toBeTruthy();
    expect(await chat({ messages: hello, model: "openai/gpt-4o" })).toMatchObject({ status: 200 });
  });

  it("answers 402 when the caller has no credit left", async () => {
    const broke = await newUser();
    const res = await call(chatRoute, "/api/ai/chat", {
      method: "POST",
      body: { messages: hello, model: "openai/gpt-4o" },
      headers: { cookie: broke.cookie },
    });
    expect(res.status).toBe(402);
    expect(res.json.error).toBeTruthy();
  });

  it("passes the provider's own response through, with the provider named in headers", async () => {
    const res = await chat({
      messages: hello,
      model: "anthropic/claude-sonnet-4",
      temperature: 0.5,
    });
    expect(res.status).toBe(200);
    // Anthropic's Messages shape, untouched.
    expect(res.json).toMatchObject({
      type: "message",
      role: "assistant",
      content: [{ type: "text", text: anthropic.state.reply }],
      usage: { input_tokens: 12, output_tokens: 7 },
    });
    expect(res.headers.get("x-ai-provider")).toBe("anthropic");
    expect(res.headers.get("x-ai-model")).toBe("anthropic/claude-sonnet-4-20250514");
    const google1 = await chat({ messages: hello, model: "google/gemini-2.5-flash" });
    expect(google1.json).toHaveProperty("candidates");
    expect(google1.json).toHaveProperty("usageMetadata");
  });

  it("auto-selects a model from taskType", async () => {
    const res = await chat({ messages: hello, taskType: "cheap" });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-ai-model")).toBe("meta-llama/llama-3.3-70b-instruct");
    expect(openrouter.state.calls.at(-1)?.body).toMatchObject({
      model: "meta-llama/llama-3.3-70b-instruct",
    });
    const vision = await chat({ messages: hello, taskType: "vision" });
    expect(vision.status).toBe(200);
  });

  it("records every call in ai_usage with its exact cost", async () => {
    await chat({ messages: hello, model: "openai/gpt-4o" });
    await flushMetering();
    const [row] = await db()`select * from ai_usage order by created_at desc limit 1`;
    expect(row).toMatchObject({
      endpoint: "chat",
      provider: "openai",
      model: "openai/gpt-4o",
      prompt_tokens: 12,
      completion_tokens: 7,
      // 12 × 2.5 + 7 × 10 = 100 micro-USD
      cost_micro_usd: 100,
      billing_mode: "credits",
      user_id: caller.id,
      status: "ok",
    });
    // The caller paid exactly that: 10 USD of credit less 100 micro-USD.
    const [account] =
      await db()`select balance_micro_usd from ai_accounts where user_id = ${caller.id}`;
    expect(Number(account?.balance_micro_usd)).toBeLessThan(10_000_000);
  });

  it.each([
    [{}, /messages/],
    [{ messages: [] }, /must not be empty/],
    [{ messages: [{ role: "tool", content: "x" }] }, /role/],
    [{ messages: [{ role: "user" }] }, /content/],
    [{ messages: "hi" }, /messages/],
    [{ messages: hello, temperature: "hot" }, /temperature/],
    [{ messages: hello, taskType: "poetry" }, /taskType/],
  ])("answers 400 for %j", async (body, message) => {
    const res = await chat(body);
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
  });

  it("answers 404 for an unknown model and when no models are available", async () => {
    const unknown = await chat({ messages: hello, model: "acme/nothing" });
    expect(unknown.status).toBe(404);
    expect(unknown.json).toEqual({ error: "Model acme/nothing not found" });
    await configureAi({});
    const none = await chat({ messages: hello });
    expect(none.status).toBe(404);
    expect(none.json).toEqual({ error: "No models available" });
  });

  it("retries a transient error on the same provider", async () => {
    openai.state.failures.push(503);
    const res = await chat({ messages: hello, model: "openai/gpt-4o" });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-ai-provider")).toBe("openai");
    expect(chatCalls(openai)).toBe(2);
    expect(chatCalls(openrouter)).toBe(0);
  });

  it("falls back to the next provider serving the model after a 500", async () => {
    openai.state.failures.push(500, 500);
    const res = await chat({ messages: hello, model: "openai/gpt-4o" });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-ai-provider")).toBe("openrouter");
    expect(res.json).toMatchObject({ provider: "OpenAI", object: "chat.completion" });
    expect(chatCalls(openai)).toBe(2);
    expect(openrouter.state.calls.at(-1)?.body).toMatchObject({ model: "openai/gpt-4o" });
  });

  it("falls back after a timeout", async () => {
    await configureAi({ ...allProviders, AI_RETRIES: "0", AI_TIMEOUT_MS: "150" });
    anthropic.state.failures.push("hang");
    const res = await chat({ messages: hello, model: "anthropic/claude-sonnet-4" });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-ai-provider")).toBe("openrouter");
    await flushMetering();
  });

  it("falls back when the platform key is refused, without retrying it", async () => {
    google.state.apiKey = "rotated";
    try {
      const res = await chat({ messages: hello, model: "google/gemini-2.5-flash" });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-ai-provider")).toBe("openrouter");
      expect(chatCalls(google)).toBe(1);
    } finally {
      google.state.apiKey = "test-key";
    }
  });

  it("answers 502 {error} when every provider fails, and records the failure", async () => {
    openai.state.failures.push(500, 500);
    openrouter.state.failures.push(502, 502);
    const res = await chat({ messages: hello, model: "openai/gpt-4o" });
    expect(res.status).toBe(502);
    expect(res.json.error).toMatch(/AI provider error: openrouter 502/);
    await flushMetering();
    const [row] =
      await db()`select * from ai_usage where status = 'error' order by created_at desc limit 1`;
    expect(row).toMatchObject({ http_status: 502, cost_micro_usd: 0 });
  });

  it("answers the provider's 400 as a 400 without trying another provider", async () => {
    openai.state.failures.push(400);
    const res = await chat({ messages: hello, model: "openai/gpt-4o" });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/temperature/);
    expect(chatCalls(openrouter)).toBe(0);
  });

  it("cools a failing provider down, skips it, and tries it again once the time is up", async () => {
    await configureAi({
      ...allProviders,
      AI_RETRIES: "0",
      AI_COOLDOWN_FAILURES: "2",
      AI_COOLDOWN_SECONDS: "30",
    });
    openai.state.failures.push(500, 500);
    await chat({ messages: hello, model: "openai/gpt-4o" });
    expect(isCoolingDown("openai")).toBe(false);
    await chat({ messages: hello, model: "openai/gpt-4o" });
    expect(isCoolingDown("openai")).toBe(true);
    expect(chatCalls(openai)).toBe(2);

    const skipped = await chat({ messages: hello, model: "openai/gpt-4o" });
    expect(skipped.headers.get("x-ai-provider")).toBe("openrouter");
    expect(chatCalls(openai)).toBe(2);

    // Only OpenAI serves o4-mini here: while it cools down the layer says so.
    const only = await chat({ messages: hello, model: "openai/o4-mini" });
    expect(only.status).toBe(502);
    expect(only.json.error).toMatch(/cooling down/);

    const now = Date.now();
    const spy = vi.spyOn(Date, "now").mockReturnValue(now + 31_000);
    try {
      const back = await chat({ messages: hello, model: "openai/gpt-4o" });
      expect(back.headers.get("x-ai-provider")).toBe("openai");
      expect(isCoolingDown("openai")).toBe(false);
    } finally {
      spy.mockRestore();
    }
  });
});
