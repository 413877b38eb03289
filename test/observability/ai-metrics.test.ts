import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as chatRoute from "../../app/routes/api.ai.chat.ts";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import { modelFamily } from "../../app/server/ai/ai-metrics.server.ts";
import { issueInstanceToken } from "../../app/server/ai/instance-tokens.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { newUser, type TestUser } from "../accounts/helpers.ts";
import { configureAi, giveCredits } from "../ai/support.ts";
import { call } from "../helpers/api.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import { sample } from "./support.ts";

// The AI layer's metrics (issue 51): calls, latency, time to first token, tokens, what was
// charged and held, refusals (402) and provider errors — by provider and model family only.

const openai = createOpenAiFake();
let caller: TestUser;
const family = { provider: "openai", model_family: "gpt-4o" };

beforeAll(async () => {
  // Recorded only while metrics are on.
  process.env.METRICS_TOKEN = "metrics-token-0123456789";
  mswServer.use(...openai.handlers);
  caller = await newUser();
  await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference)
    values ('led_metrics', ${caller.id}, 10000000, 'purchase', 'metrics-test')`;
});

beforeEach(async () => {
  openai.state.failures = [];
  await configureAi({ OPENAI_API_KEY: "test-key", AI_RETRIES: "0" });
});

const chat = (body: Record<string, unknown>, cookie = caller.cookie) =>
  call(chatRoute, "/api/ai/chat", {
    method: "POST",
    body: { messages: [{ role: "user", content: "Say hello" }], ...body },
    headers: { cookie },
  });

describe("AI metrics", () => {
  it("count a call with its tokens, its charge, its hold and its latency", async () => {
    const before = {
      ok: await sample("platform_ai_calls_total", { ...family, outcome: "ok" }),
      prompt: await sample("platform_ai_tokens_total", { ...family, kind: "prompt" }),
      completion: await sample("platform_ai_tokens_total", { ...family, kind: "completion" }),
      charged: await sample("platform_ai_charged_micro_usd_total", family),
      held: await sample("platform_ai_held_micro_usd_total"),
      latency: await sample("platform_ai_call_duration_seconds_count", family),
      overhead: await sample("platform_ai_overhead_seconds_count"),
    };
    const res = await chat({ model: "openai/gpt-4o" });
    expect(res.status).toBe(200);
    await flushMetering();
    const [usage] = await db()<{ cost: number }[]>`
      select cost_micro_usd::int as cost from ai_usage where user_id = ${caller.id}
      order by created_at desc limit 1`;
    expect(await sample("platform_ai_calls_total", { ...family, outcome: "ok" })).toBe(
      before.ok + 1,
    );
    expect(await sample("platform_ai_tokens_total", { ...family, kind: "prompt" })).toBe(
      before.prompt + 12,
    );
    expect(await sample("platform_ai_tokens_total", { ...family, kind: "completion" })).toBe(
      before.completion + 7,
    );
    expect(usage?.cost).toBeGreaterThan(0);
    expect(await sample("platform_ai_charged_micro_usd_total", family)).toBe(
      before.charged + (usage?.cost ?? 0),
    );
    expect(await sample("platform_ai_held_micro_usd_total")).toBeGreaterThan(before.held);
    expect(await sample("platform_ai_call_duration_seconds_count", family)).toBe(
      before.latency + 1,
    );
    expect(await sample("platform_ai_overhead_seconds_count")).toBe(before.overhead + 1);
  });

  it("time a stream's first token", async () => {
    const before = await sample("platform_ai_time_to_first_token_seconds_count", family);
    await giveCredits("usr_metrics_agent", 1_000_000);
    const token = await issueInstanceToken("usr_metrics_agent", "ins_metrics_agent");
    const res = await call(completionsRoute, "/api/ai/v1/chat/completions", {
      method: "POST",
      body: { model: "openai/gpt-4o", messages: [{ role: "user", content: "Hi" }], stream: true },
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
    expect(res.text).toContain("data: [DONE]");
    await flushMetering();
    await expect
      .poll(() => sample("platform_ai_time_to_first_token_seconds_count", family))
      .toBe(before + 1);
  });

  it("count what a provider reported beyond a call's bound (decision 0206)", async () => {
    const before = await sample("platform_ai_over_bound_micro_usd_total", family);
    openai.state.usageFor = () => ({ prompt: 1000, completion: 1000 });
    try {
      const res = await chat({ model: "openai/gpt-4o", max_tokens: 10 });
      expect(res.status).toBe(200);
    } finally {
      openai.state.usageFor = undefined;
    }
    await flushMetering();
    const [row] = await db()<{ reported: number; charged: number }[]>`
      select a.reported_cost_micro_usd::int as reported, a.charged_micro_usd::int as charged
      from ai_usage_anomalies a join ai_usage u on u.id = a.usage_id
      where u.user_id = ${caller.id}`;
    expect(row && row.reported > row.charged).toBe(true);
    expect(await sample("platform_ai_over_bound_micro_usd_total", family)).toBe(
      before + (row ? row.reported - row.charged : Number.NaN),
    );
  });

  it("count a 402 refusal by its reason", async () => {
    const broke = await newUser();
    const before = await sample("platform_ai_refusals_total", { reason: "credits" });
    const res = await chat({ model: "openai/gpt-4o" }, broke.cookie);
    expect(res.status).toBe(402);
    expect(await sample("platform_ai_refusals_total", { reason: "credits" })).toBe(before + 1);
  });

  it("count a provider's error and the failed call", async () => {
    const errors = await sample("platform_ai_provider_errors_total", {
      provider: "openai",
      transient: "true",
    });
    const failed = await sample("platform_ai_calls_total", { ...family, outcome: "error" });
    openai.state.failures.push(500);
    const res = await chat({ model: "openai/gpt-4o" });
    expect(res.status).toBe(502);
    await flushMetering();
    expect(
      await sample("platform_ai_provider_errors_total", { provider: "openai", transient: "true" }),
    ).toBe(errors + 1);
    expect(await sample("platform_ai_calls_total", { ...family, outcome: "error" })).toBe(
      failed + 1,
    );
  });
});

describe("AI metrics with metrics off", () => {
  it("record nothing while METRICS_TOKEN is unset", async () => {
    delete process.env.METRICS_TOKEN;
    resetEnvCache();
    try {
      const before = await sample("platform_ai_calls_total", { ...family, outcome: "ok" });
      expect((await chat({ model: "openai/gpt-4o" })).status).toBe(200);
      await flushMetering();
      expect(await sample("platform_ai_calls_total", { ...family, outcome: "ok" })).toBe(before);
    } finally {
      process.env.METRICS_TOKEN = "metrics-token-0123456789";
      resetEnvCache();
    }
  });
});

describe("modelFamily", () => {
  it("names the vendors' model lines and nothing finer", () => {
    expect(modelFamily("openai/gpt-4o-2024-08-06")).toBe("gpt-4o");
    expect(modelFamily("gpt-4o-mini")).toBe("gpt-4o-mini");
    expect(modelFamily("openai/gpt-4.1-nano")).toBe("gpt-4.1-nano");
    expect(modelFamily("o3-mini")).toBe("o3-mini");
    expect(modelFamily("anthropic/claude-sonnet-4-20250514")).toBe("claude-sonnet");
    expect(modelFamily("claude-3-5-haiku-latest")).toBe("claude-haiku");
    expect(modelFamily("google/gemini-2.5-flash")).toBe("gemini-2.5-flash");
    expect(modelFamily("meta-llama/llama-3.1-70b-instruct")).toBe("llama");
    expect(modelFamily("usr_1234/my-own-finetune")).toBe("other");
  });
});
