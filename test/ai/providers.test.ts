import { HttpResponse, http } from "msw";
import { beforeAll, describe, expect, it } from "vitest";
import { anthropicClient } from "../../app/server/ai/providers/anthropic.server.ts";
import { googleClient } from "../../app/server/ai/providers/google.server.ts";
import { openaiClient } from "../../app/server/ai/providers/openai.server.ts";
import { openrouterClient } from "../../app/server/ai/providers/openrouter.server.ts";
import {
  type ProviderConfig,
  ProviderError,
  type StreamCompletion,
} from "../../app/server/ai/providers/shared.server.ts";
import { ANTHROPIC_BASE, createAnthropicFake } from "../msw/handlers/anthropic.ts";
import { createGoogleFake, GOOGLE_BASE } from "../msw/handlers/google.ts";
import { createOpenAiFake, OPENAI_BASE } from "../msw/handlers/openai.ts";
import { createOpenRouterFake, OPENROUTER_BASE } from "../msw/handlers/openrouter.ts";
import { mswServer } from "../msw/server.ts";

// Each provider client against msw handlers speaking that provider's wire format.

const openai = createOpenAiFake();
const anthropic = createAnthropicFake();
const google = createGoogleFake();
const openrouter = createOpenRouterFake();
const LOCAL = "http://llama.local:8080/v1";
const local = createOpenAiFake(LOCAL, { apiKey: "", models: ["llama3.2:3b"] });

beforeAll(() => {
  mswServer.use(
    ...openai.handlers,
    ...anthropic.handlers,
    ...google.handlers,
    ...openrouter.handlers,
    ...local.handlers,
  );
});

const cfg = (
  name: ProviderConfig["name"],
  baseUrl: string,
  apiKey = "test-key",
): ProviderConfig => ({
  name,
  baseUrl,
  apiKey,
  custom: false,
});
const signal = () => AbortSignal.timeout(5_000);
const messages = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "Say hello" },
];

async function drain(result: StreamCompletion) {
  const text = await new Response(result.stream).text();
  const events = text
    .split("\n\n")
    .filter(Boolean)
    .map((block) => block.replace(/^data: /, ""));
  return { text, events, done: await result.done };
}

describe("OpenAI client", () => {
  const config = cfg("openai", OPENAI_BASE);

  it("lists models", async () => {
    const models = await openaiClient.listModels(config, signal());
    expect(models.map((m) => m.modelId)).toContain("gpt-4o");
    expect(openai.state.calls.at(-1)?.headers.get("authorization")).toBe("Bearer test-key");
  });

  it("completes a chat and reports usage", async () => {
    const result = await openaiClient.chat(config, { model: "gpt-4o", messages }, signal());
    expect(result.text).toBe(openai.state.reply);
    expect(result.usage).toEqual({ promptTokens: 12, completionTokens: 7 });
    expect(result.native).toMatchObject({ object: "chat.completion", model: "gpt-4o" });
    expect(openai.state.calls.at(-1)?.body).toMatchObject({ model: "gpt-4o", stream: false });
  });

  it("streams, asking for the usage chunk, and passes the bytes through", async () => {
    const result = await openaiClient.chatStream(config, { model: "gpt-4o", messages }, signal());
    const { events, done } = await drain(result);
    expect(openai.state.calls.at(-1)?.body).toMatchObject({
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(events.at(-1)).toBe("[DONE]");
    expect(done).toEqual({
      usage: { promptTokens: 12, completionTokens: 7 },
      text: openai.state.reply,
      // When the first chunk came (the time to first token; issue 51).
      firstChunkAt: expect.any(Number),
    });
  });

  it("maps a bad key to a permanent error and a 500 to a transient one", async () => {
    const bad = openaiClient.chat(
      cfg("openai", OPENAI_BASE, "sk-wrong"),
      { model: "gpt-4o", messages },
      signal(),
    );
    await expect(bad).rejects.toMatchObject({ status: 401, transient: false, clientError: false });
    openai.state.failures.push(500);
    const err = await openaiClient
      .chat(config, { model: "gpt-4o", messages }, signal())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ status: 500, transient: true });
    expect((err as Error).message).toContain("The server had an error");
    openai.state.failures.push(400);
    await expect(
      openaiClient.chat(config, { model: "gpt-4o", messages }, signal()),
    ).rejects.toMatchObject({ status: 400, clientError: true });
  });

  it("treats a network failure as transient (status 0)", async () => {
    openai.state.failures.push("network");
    await expect(
      openaiClient.chat(config, { model: "gpt-4o", messages }, signal()),
    ).rejects.toMatchObject({ status: 0, transient: true });
  });

  it("talks to a local OpenAI-compatible server without a key", async () => {
    const localConfig: ProviderConfig = {
      name: "openai",
      baseUrl: LOCAL,
      apiKey: undefined,
      custom: true,
    };
    const models = await openaiClient.listModels(localConfig, signal());
    expect(local.state.calls.at(-1)?.headers.get("authorization")).toBeNull();
    expect(models).toEqual([{ modelId: "llama3.2:3b" }]);
  });
});

describe("Anthropic client", () => {
  const config = cfg("anthropic", ANTHROPIC_BASE);

  it("lists models with display names", async () => {
    const models = await anthropicClient.listModels(config, signal());
    expect(models).toContainEqual({
      modelId: "claude-sonnet-4-20250514",
      name: "Claude Sonnet 4",
      contextLength: undefined,
    });
  });

  it("sends system separately with max_tokens, returns the native message and an OpenAI view", async () => {
    const result = await anthropicClient.chat(
      config,
      { model: "claude-sonnet-4-20250514", messages, temperature: 0.2 },
      signal(),
    );
    expect(anthropic.state.calls.at(-1)?.body).toEqual({
      model: "claude-sonnet-4-20250514",
      max_tokens: 4096,
      system: "Be brief.",
      messages: [{ role: "user", content: "Say hello" }],
      temperature: 0.2,
    });
    expect(result.native).toMatchObject({ type: "message", content: [{ type: "text" }] });
    expect(result.openai).toMatchObject({
      object: "chat.completion",
      choices: [
        { message: { role: "assistant", content: anthropic.state.reply }, finish_reason: "stop" },
      ],
      usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
    });
  });

  it("translates its event stream into OpenAI chunks with usage", async () => {
    const result = await anthropicClient.chatStream(
      config,
      { model: "claude-sonnet-4-20250514", messages },
      signal(),
    );
    const { events, done } = await drain(result);
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks[0].choices[0].delta).toEqual({ role: "assistant", content: "" });
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    expect(text).toBe(anthropic.state.reply);
    expect(chunks.at(-1).usage).toEqual({
      prompt_tokens: 12,
      completion_tokens: 7,
      total_tokens: 19,
    });
    expect(done.usage).toEqual({ promptTokens: 12, completionTokens: 7 });
  });

  it("maps 529 overloaded to a transient error", async () => {
    anthropic.state.failures.push(529);
    await expect(
      anthropicClient.chat(config, { model: "claude-sonnet-4-20250514", messages }, signal()),
    ).rejects.toMatchObject({
      status: 529,
      transient: true,
      message: expect.stringContaining("Overloaded"),
    });
  });
});

describe("Google client", () => {
  const config = cfg("google", GOOGLE_BASE);

  it("lists only models that generate content", async () => {
    const models = await googleClient.listModels(config, signal());
    expect(models.map((m) => m.modelId)).toEqual(["gemini-2.5-flash", "gemini-2.5-pro"]);
    expect(models[0]?.contextLength).toBe(1_048_576);
  });

  it("calls generateContent with systemInstruction and generationConfig", async () => {
    const result = await googleClient.chat(
      config,
      { model: "gemini-2.5-flash", messages, max_tokens: 50, top_p: 0.9 },
      signal(),
    );
    expect(google.state.calls.at(-1)?.url).toBe(
      `${GOOGLE_BASE}/v1beta/models/gemini-2.5-flash:generateContent`,
    );
    expect(google.state.calls.at(-1)?.body).toEqual({
      contents: [{ role: "user", parts: [{ text: "Say hello" }] }],
      systemInstruction: { parts: [{ text: "Be brief." }] },
      generationConfig: { topP: 0.9, maxOutputTokens: 50 },
    });
    expect(result.usage).toEqual({ promptTokens: 12, completionTokens: 7 });
    expect(result.native).toHaveProperty("candidates");
  });

  it("translates streamGenerateContent (alt=sse, CRLF-separated) into OpenAI chunks", async () => {
    const result = await googleClient.chatStream(
      config,
      { model: "gemini-2.5-flash", messages },
      signal(),
    );
    const { events, done } = await drain(result);
    expect(google.state.calls.at(-1)?.url).toContain(":streamGenerateContent?alt=sse");
    expect(done.text).toBe(google.state.reply);
    expect(done.usage).toEqual({ promptTokens: 12, completionTokens: 7 });
    expect(events.at(-1)).toBe("[DONE]");
  });

  it("treats Google's 400 for a bad key as an authentication failure, not a client error", async () => {
    await expect(
      googleClient.chat(
        cfg("google", GOOGLE_BASE, "wrong"),
        { model: "gemini-2.5-flash", messages },
        signal(),
      ),
    ).rejects.toMatchObject({ status: 401, clientError: false });
  });
});

describe("OpenRouter client", () => {
  const config = cfg("openrouter", OPENROUTER_BASE);

  it("lists models with per-token prices converted exactly, skipping variable-price routers", async () => {
    const models = await openrouterClient.listModels(config, signal());
    const gpt = models.find((m) => m.modelId === "openai/gpt-4o");
    expect(gpt?.pricing).toEqual({ prompt: 2_500_000n, completion: 10_000_000n });
    expect(gpt?.contextLength).toBe(128_000);
    expect(gpt?.capabilities).toEqual(["vision"]);
    expect(models.find((m) => m.modelId === "meta-llama/llama-3.3-70b-instruct")?.pricing).toEqual({
      prompt: 38_000n,
      completion: 120_000n,
    });
    expect(models.map((m) => m.modelId)).not.toContain("openrouter/auto");
  });

  it("rejects a listing without prices as invalid", async () => {
    openrouter.state.listing = "invalid";
    await expect(openrouterClient.listModels(config, signal())).rejects.toThrow(/not JSON/);
    openrouter.state.listing = "ok";
  });

  it("completes chats in OpenAI format", async () => {
    const result = await openrouterClient.chat(
      config,
      { model: "anthropic/claude-sonnet-4", messages },
      signal(),
    );
    expect(result.native).toMatchObject({ provider: "OpenAI", object: "chat.completion" });
    expect(result.usage).toEqual({ promptTokens: 12, completionTokens: 7 });
  });
});

describe("answers of an unexpected shape", () => {
  // A provider (or a local server) answering 200 with something else is a provider failure
  // (502, so the next provider is tried), never a crash further in.
  const BAD = "http://malformed.local";
  beforeAll(() => {
    mswServer.use(
      http.post(`${BAD}/v1/chat/completions`, () => HttpResponse.json({ choices: "none" })),
      http.get(`${BAD}/v1/models`, () => HttpResponse.json({ data: [{ name: "no id" }] })),
      http.post(`${BAD}/v1/messages`, () => HttpResponse.json({ id: "m", content: 5 })),
      http.post(`${BAD}/v1beta/models/:model`, () =>
        HttpResponse.json({ candidates: [{ content: { parts: "x" } }] }),
      ),
    );
  });

  it("is a 502 ProviderError for every provider", async () => {
    const failures = [
      openaiClient.chat(cfg("openai", `${BAD}/v1`), { model: "gpt-4o", messages }, signal()),
      openaiClient.listModels(cfg("openai", `${BAD}/v1`), signal()),
      anthropicClient.chat(cfg("anthropic", BAD), { model: "claude", messages }, signal()),
      googleClient.chat(cfg("google", BAD), { model: "gemini", messages }, signal()),
    ];
    for (const failure of failures) {
      const error = await failure.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderError);
      expect((error as ProviderError).status).toBe(502);
      expect((error as ProviderError).message).toMatch(/: unexpected /);
    }
  });
});
