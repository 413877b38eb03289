import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import { issueInstanceToken } from "../../app/server/ai/instance-tokens.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { call } from "../helpers/api.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { createOpenRouterFake } from "../msw/handlers/openrouter.ts";
import { mswServer } from "../msw/server.ts";
import { configureAi, giveCredits } from "./support.ts";

// /api/ai/v1 forwards only the parameters the platform prices (decision 0199): a provider's own
// extras that spend beyond the hold (OpenRouter's model fallbacks and plugins, OpenAI's priority
// tier) are refused with 400 before anything is held or sent.

const openai = createOpenAiFake();
const openrouter = createOpenRouterFake();

beforeAll(() => {
  mswServer.use(...openai.handlers, ...openrouter.handlers);
});

let seq = 0;
let userId: string;
let token: string;

beforeEach(async () => {
  for (const f of [openai, openrouter]) {
    f.state.calls = [];
    f.state.usage = { prompt: 12, completion: 7 };
  }
  await configureAi({ OPENAI_API_KEY: "test-key", OPENROUTER_API_KEY: "test-key" });
  seq += 1;
  userId = `usr_params_${seq}`;
  token = await issueInstanceToken(userId, `ins_params_${seq}`);
  await giveCredits(userId, 1_000_000);
});

const hello = [{ role: "user", content: "Say hello" }];
const complete = (body: Record<string, unknown>) =>
  call(completionsRoute, "/api/ai/v1/chat/completions", {
    method: "POST",
    body,
    headers: { authorization: `Bearer ${token}` },
  });
const chatCalls = () =>
  [...openai.state.calls, ...openrouter.state.calls].filter((c) => c.body !== undefined);

describe("/api/ai/v1 provider parameters", () => {
  it.each([
    [
      "OpenRouter's model fallbacks",
      "meta-llama/llama-3.3-70b-instruct",
      "models",
      ["openai/o1-pro"],
    ],
    ["OpenRouter's plugins", "meta-llama/llama-3.3-70b-instruct", "plugins", [{ id: "web" }]],
    [
      "OpenRouter's provider routing",
      "meta-llama/llama-3.3-70b-instruct",
      "provider",
      {
        order: ["x"],
      },
    ],
    ["OpenAI's priority tier", "openai/gpt-4o", "service_tier", "priority"],
    ["audio output", "openai/gpt-4o", "modalities", ["text", "audio"]],
  ])("refuses %s with 400 and calls no provider", async (_, model, name, value) => {
    const res = await complete({ model, messages: hello, [name]: value });
    expect(res.status, res.text).toBe(400);
    expect(res.json).toEqual({ error: `unsupported parameter: ${name}` });
    expect(chatCalls()).toHaveLength(0);
    await flushMetering();
    const [held] = await db()`select count(*)::int as n from ai_usage where user_id = ${userId}`;
    expect(held!.n).toBe(0);
  });

  it("forwards the OpenAI parameters the platform prices, as OpenClaw sends them", async () => {
    const body = {
      model: "openai/gpt-4o",
      messages: hello,
      stream: false,
      store: false,
      prompt_cache_key: "agent:main",
      temperature: 0.2,
      top_p: 0.9,
      max_completion_tokens: 64,
      stop: ["\n\n"],
      seed: 7,
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
      tool_choice: "auto",
      response_format: { type: "text" },
    };
    const res = await complete(body);
    expect(res.status, res.text).toBe(200);
    const [sent] = chatCalls();
    expect(sent?.body).toMatchObject({ ...body, model: "gpt-4o" });
    const routed = await complete({
      model: "meta-llama/llama-3.3-70b-instruct",
      messages: hello,
      max_tokens: 32,
    });
    expect(routed.status, routed.text).toBe(200);
  });
});
