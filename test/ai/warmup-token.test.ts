import { beforeAll, beforeEach, expect, it } from "vitest";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import * as modelsRoute from "../../app/routes/api.ai.v1.models.ts";
import { WARMUP_REPLY } from "../../app/server/ai/agents-endpoint.server.ts";
import {
  authenticateInstanceToken,
  handOverWarmupToken,
  issueInstanceToken,
  issueWarmupToken,
  revokeInstanceTokens,
} from "../../app/server/ai/instance-tokens.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { call } from "../helpers/api.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import { configureAi, giveCredits } from "./support.ts";

// A pooled gateway's warm-up token (decision 0038): the agents' endpoint answers it itself, in
// OpenAI's wire format, JSON and streamed, with no provider call and nothing metered or
// reserved; revoked, it is refused like any other token.

const openai = createOpenAiFake();
let seq = 0;
let poolId: string;
let token: string;

beforeAll(() => {
  mswServer.use(...openai.handlers);
});

beforeEach(async () => {
  openai.state.calls = [];
  await configureAi({ OPENAI_API_KEY: "test-key" });
  poolId = `gwp_test${++seq}`;
  token = await issueWarmupToken(poolId);
});

const complete = (body: object, bearer = token) =>
  call(completionsRoute, "/api/ai/v1/chat/completions", {
    method: "POST",
    body: { model: "openai/gpt-4o-mini", messages: [{ role: "user", content: "hi" }], ...body },
    headers: { authorization: `Bearer ${bearer}` },
  });

async function nothingSpent() {
  await flushMetering();
  // No chat call reached the provider (a catalog refresh may list its models).
  expect(openai.state.calls.filter((c) => c.body !== undefined)).toEqual([]);
  expect(await db()`select 1 from ai_usage`).toHaveLength(0);
  expect(await db()`select 1 from ai_reservations`).toHaveLength(0);
  expect(await db()`select 1 from credit_ledger`).toHaveLength(0);
}

it("belongs to no user: the identity is the pooled gateway's", async () => {
  expect(await authenticateInstanceToken(token)).toEqual({ warmup: true, poolId });
  const [row] = await db()`select user_id, instance_id, warmup from ai_instance_tokens
    where instance_id = ${poolId}`;
  expect(row).toEqual({ user_id: null, instance_id: poolId, warmup: true });
});

it("gets a minimal chat.completion without a provider call or any metering", async () => {
  const res = await complete({});
  expect(res.status).toBe(200);
  expect(res.json).toMatchObject({
    object: "chat.completion",
    model: "openai/gpt-4o-mini",
    choices: [
      { index: 0, message: { role: "assistant", content: WARMUP_REPLY }, finish_reason: "stop" },
    ],
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
  });
  expect(res.json.id).toMatch(/^chatcmpl-/);
  await nothingSpent();
});

it("streams chat.completion.chunk events ending with [DONE]", async () => {
  const res = await complete({ stream: true });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const events = res.text
    .split("\n\n")
    .filter(Boolean)
    .map((e) => e.replace(/^data: /, ""));
  expect(events.at(-1)).toBe("[DONE]");
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
  for (const c of chunks) expect(c.object).toBe("chat.completion.chunk");
  const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
  expect(text).toBe(WARMUP_REPLY);
  expect(chunks.some((c) => c.choices[0]?.finish_reason === "stop")).toBe(true);
  expect(chunks.at(-1).usage).toMatchObject({ total_tokens: 0 });
  await nothingSpent();
});

it("lists models, and is refused once revoked", async () => {
  const models = await call(modelsRoute, "/api/ai/v1/models", {
    headers: { authorization: `Bearer ${token}` },
  });
  expect(models.status).toBe(200);
  expect(await revokeInstanceTokens(poolId)).toBe(1);
  expect(await authenticateInstanceToken(token)).toBeUndefined();
  const refused = await complete({});
  expect(refused.status).toBe(401);
  await nothingSpent();
});

it("is handed over to the tenant at adoption: the same token then calls the provider, billed to the tenant", async () => {
  const tenant = `usr_tenant${seq}`;
  const instance = `ins_tenant${seq}`;
  await giveCredits(tenant, 5_000_000);
  const older = await issueInstanceToken(tenant, instance);
  expect(await authenticateInstanceToken(token)).toMatchObject({ warmup: true });
  expect(await handOverWarmupToken(poolId, tenant, instance)).toBe(true);
  expect(await authenticateInstanceToken(token)).toMatchObject({
    userId: tenant,
    instanceId: instance,
  });
  expect(await authenticateInstanceToken(older)).toBeUndefined(); // one live token per instance
  const res = await complete({});
  expect(res.status).toBe(200);
  expect(res.json.choices[0].message.content).not.toBe(WARMUP_REPLY);
  expect(openai.state.calls.filter((c) => c.url.endsWith("/chat/completions"))).toHaveLength(1);
  await flushMetering();
  const usage = await db()`select user_id, instance_id from ai_usage`;
  expect(usage).toEqual([{ user_id: tenant, instance_id: instance }]);
  // Nothing left to hand over twice.
  expect(await handOverWarmupToken(poolId, tenant, instance)).toBe(false);
});

it("a warm-up row without the flag, or a user with the flag, cannot exist", async () => {
  await expect(
    db()`insert into ai_instance_tokens (token_hash, user_id, instance_id, warmup)
      values ('x1', null, 'gwp_x', false)`,
  ).rejects.toThrow(/ai_instance_tokens_owner/);
  await expect(
    db()`insert into ai_instance_tokens (token_hash, user_id, instance_id, warmup)
      values ('x2', 'usr_x', 'gwp_x', true)`,
  ).rejects.toThrow(/ai_instance_tokens_owner/);
});
