import { beforeAll, beforeEach, expect, it } from "vitest";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import { WARMUP_REPLY } from "../../app/server/ai/agents-endpoint.server.ts";
import { issueInstanceToken } from "../../app/server/ai/instance-tokens.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { isWarmUpTurn, warmUpTag } from "../../app/server/ai/warmup-tag.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { call } from "../helpers/api.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import { configureAi, giveCredits } from "./support.ts";

// A tenant gateway's dry-run turn (decision 0087): under the tenant's own token, its prompt's
// tag makes the agents' endpoint answer it itself — only for that instance, only while the tag
// is valid; anything else is an ordinary, metered call.

const openai = createOpenAiFake();
const USER = "usr_tag";
const INSTANCE = "ins_tag";
let token: string;

beforeAll(async () => {
  mswServer.use(...openai.handlers);
  await configureAi({ OPENAI_API_KEY: "test-key" });
  await giveCredits(USER, 5_000_000);
  token = await issueInstanceToken(USER, INSTANCE);
});

beforeEach(() => {
  openai.state.calls = [];
});

const user = (content: unknown) => [{ role: "user", content }];

it("a tag is valid for its own instance only, in the last or the first turn, until it expires, and not when altered", () => {
  const now = Date.UTC(2026, 10, 22, 18, 0);
  const tag = warmUpTag(INSTANCE, now);
  // Hex only: no run of characters OpenClaw's redaction takes for a vendor token (`sk-…`).
  expect(tag).toMatch(/^\[warm-up [0-9a-z]+\.[0-9a-f]{64}\]$/);
  expect(isWarmUpTurn(user(`Warm-up: reply with OK. ${tag}`), INSTANCE, now)).toBe(true);
  // Wrapped by the gateway (a timestamp envelope), or sent as content parts.
  expect(isWarmUpTurn(user(`[Sun 18:00 UTC] Warm-up ${tag}`), INSTANCE, now)).toBe(true);
  expect(isWarmUpTurn(user([{ type: "text", text: tag }]), INSTANCE, now)).toBe(true);

  expect(isWarmUpTurn(user(tag), "ins_other", now)).toBe(false);
  expect(isWarmUpTurn(user(tag), INSTANCE, now + 15 * 60_000 + 1)).toBe(false);
  // A tag minted too far ahead (a forged expiry cannot pass the MAC either).
  expect(isWarmUpTurn(user(warmUpTag(INSTANCE, now + 60 * 60_000)), INSTANCE, now)).toBe(false);
  const flipped = tag.replace(/.(?=\]$)/, (c) => (c === "a" ? "b" : "a"));
  expect(isWarmUpTurn(user(flipped), INSTANCE, now)).toBe(false);
  const later = tag.replace(/warm-up ([0-9a-z]+)/, (_m, e: string) => `warm-up ${e}1`);
  expect(isWarmUpTurn(user(later), INSTANCE, now)).toBe(false);
  // Only the last turn counts: its user messages (OpenClaw appends its context as another one).
  const context = user([{ type: "text", text: "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>" }]);
  expect(isWarmUpTurn([...user(`Warm-up ${tag}`), ...context], INSTANCE, now)).toBe(true);
  // A session the dry run started: the gateway's own continuation of it (OpenClaw's
  // instruction after an attempt without a visible answer) is the same warm-up.
  const continued = [
    ...user(`Warm-up ${tag}`),
    ...context,
    { role: "assistant", content: "" },
    ...user("The previous attempt did not produce a user-visible answer. Continue"),
  ];
  expect(isWarmUpTurn(continued, INSTANCE, now)).toBe(true);
  // A tenant's session, where a tag (pasted) was in neither the first nor the last turn.
  const answered = { role: "assistant", content: "OK" };
  const middle = [...user("hello"), answered, ...user(tag), answered, ...user("and now?")];
  expect(isWarmUpTurn(middle, INSTANCE, now)).toBe(false);
  expect(isWarmUpTurn([...user("hello"), answered, ...user(tag)], INSTANCE, now)).toBe(true);
  expect(isWarmUpTurn([{ role: "system", content: tag }], INSTANCE, now)).toBe(false);
});

const complete = (content: string, stream = false) =>
  call(completionsRoute, "/api/ai/v1/chat/completions", {
    method: "POST",
    body: { model: "openai/gpt-4o-mini", messages: user(content), stream },
    headers: { authorization: `Bearer ${token}` },
  });

it("the endpoint answers a tagged turn of the token's instance itself: no provider call, nothing metered", async () => {
  const res = await complete(`Warm-up: reply with OK. ${warmUpTag(INSTANCE)}`);
  expect(res.status).toBe(200);
  expect(res.json).toMatchObject({
    object: "chat.completion",
    choices: [{ message: { role: "assistant", content: WARMUP_REPLY } }],
  });
  const streamed = await complete(`Warm-up: reply with OK. ${warmUpTag(INSTANCE)}`, true);
  expect(streamed.status).toBe(200);
  expect(streamed.text).toContain(`"content":"${WARMUP_REPLY}"`);
  expect(streamed.text).toContain("data: [DONE]");
  await flushMetering();
  expect(openai.state.calls.filter((c) => c.body !== undefined)).toEqual([]);
  expect(await db()`select 1 from ai_usage where user_id = ${USER}`).toHaveLength(0);
});

it("another instance's tag is an ordinary prompt: sent to the provider and metered", async () => {
  const res = await complete(`Warm-up: reply with OK. ${warmUpTag("ins_other")}`);
  expect(res.status).toBe(200);
  expect(res.headers.get("x-ai-provider")).toBe("openai");
  expect(openai.state.calls.filter((c) => c.body !== undefined)).toHaveLength(1);
  await flushMetering();
  expect(await db()`select 1 from ai_usage where user_id = ${USER}`).toHaveLength(1);
});
