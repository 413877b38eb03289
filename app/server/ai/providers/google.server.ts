import { z } from "zod";
import {
  type ChatBody,
  type Completion,
  contentText,
  joinUrl,
  type ListedModel,
  openAiUsage,
  optionalOf,
  type ProviderClient,
  type ProviderConfig,
  ProviderError,
  type ProviderRequestInit,
  parseAnswer,
  providerFetch,
  readJson,
  translateSse,
  type Usage,
} from "./shared.server.ts";

// Google's Gemini API (generativelanguage, v1beta): generateContent and
// streamGenerateContent?alt=sse, key in `x-goog-api-key`. Roles user/model, system messages as
// `systemInstruction`; answers translated to OpenAI shapes like Anthropic's.

export const GOOGLE_DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com";

function headers(config: ProviderConfig): Record<string, string> {
  return {
    "content-type": "application/json",
    ...(config.apiKey ? { "x-goog-api-key": config.apiKey } : {}),
  };
}

export function toGoogleRequest(body: ChatBody) {
  const system = body.messages
    .filter((m) => m.role === "system" || m.role === "developer")
    .map((m) => contentText(m.content))
    .join("\n\n");
  const contents = body.messages
    .filter((m) => m.role === "user" || m.role === "assistant")
    .map((m) => ({
      role: m.role === "assistant" ? "model" : "user",
      parts: [{ text: contentText(m.content) }],
    }));
  const generationConfig: Record<string, unknown> = {};
  if (body.temperature !== undefined) generationConfig.temperature = body.temperature;
  if (body.top_p !== undefined) generationConfig.topP = body.top_p;
  if (body.max_tokens !== undefined) generationConfig.maxOutputTokens = body.max_tokens;
  if (typeof body.stop === "string") generationConfig.stopSequences = [body.stop];
  if (Array.isArray(body.stop)) generationConfig.stopSequences = body.stop;
  return {
    contents,
    ...(system ? { systemInstruction: { parts: [{ text: system }] } } : {}),
    ...(Object.keys(generationConfig).length ? { generationConfig } : {}),
  };
}

// What we read of Google's answers (a stream event has the same shape as an answer, or an
// error). Counts of the wrong type are no counts (metering then counts tokens itself).
const count = z.number().optional().catch(undefined);
const candidatesSchema = z.array(
  z.object({
    content: z
      .object({ parts: z.array(z.object({ text: z.string().optional() })).optional() })
      .optional(),
    finishReason: z.string().optional(),
  }),
);
const responseFields = {
  usageMetadata: z
    .object({ promptTokenCount: count, candidatesTokenCount: count })
    .optional()
    .catch(undefined),
  modelVersion: optionalOf(z.string()),
  responseId: optionalOf(z.string()),
};
const responseSchema = z.object({ candidates: candidatesSchema, ...responseFields });
const streamEventSchema = z.object({
  candidates: candidatesSchema.optional(),
  ...responseFields,
  error: z.object({ message: z.string().optional() }).optional(),
});
const listingSchema = z.object({
  models: z.array(
    z.object({
      name: z.string(),
      supportedGenerationMethods: optionalOf(z.array(z.unknown())),
      displayName: optionalOf(z.string()),
      description: optionalOf(z.string()),
      inputTokenLimit: optionalOf(z.number()),
    }),
  ),
  nextPageToken: optionalOf(z.string()),
});

type GoogleResponse = z.output<typeof streamEventSchema>;

const finishReason = (reason: string | undefined): string | null =>
  !reason
    ? null
    : reason === "MAX_TOKENS"
      ? "length"
      : reason === "STOP"
        ? "stop"
        : "content_filter";

function usageOf(response: GoogleResponse): Usage | null {
  const u = response.usageMetadata;
  if (u?.promptTokenCount === undefined) return null;
  return { promptTokens: u.promptTokenCount, completionTokens: u.candidatesTokenCount ?? 0 };
}

const textOf = (response: GoogleResponse): string =>
  (response.candidates?.[0]?.content?.parts ?? []).map((p) => p.text ?? "").join("");

/** Google answers a bad API key with 400 INVALID_ARGUMENT: that is our failure, not the caller's. */
async function googleFetch(url: string, init: ProviderRequestInit, signal: AbortSignal) {
  try {
    return await providerFetch("google", url, init, signal);
  } catch (error) {
    if (error instanceof ProviderError && error.status === 400 && /api key/i.test(error.message)) {
      throw new ProviderError("google", 401, error.message);
    }
    throw error;
  }
}

const modelPath = (model: string) => `v1beta/models/${encodeURIComponent(model)}`;
const created = () => Math.floor(Date.now() / 1000);

export const googleClient: ProviderClient = {
  async listModels(config, signal) {
    const models: ListedModel[] = [];
    let pageToken: string | undefined;
    for (let page = 0; page < 20; page++) {
      const url = new URL(joinUrl(config.baseUrl, "v1beta/models"));
      url.searchParams.set("pageSize", "1000");
      if (pageToken) url.searchParams.set("pageToken", pageToken);
      const response = await googleFetch(url.toString(), { headers: headers(config) }, signal);
      const body = parseAnswer(
        "google",
        listingSchema,
        await readJson("google", response),
        "model listing",
      );
      for (const entry of body.models) {
        if (!entry.supportedGenerationMethods?.includes("generateContent")) continue;
        models.push({
          modelId: entry.name.replace(/^models\//, ""),
          name: entry.displayName,
          description: entry.description,
          contextLength: entry.inputTokenLimit,
        });
      }
      if (!body.nextPageToken) break;
      pageToken = body.nextPageToken;
    }
    return models;
  },

  async chat(config, body, signal): Promise<Completion> {
    const response = await googleFetch(
      joinUrl(config.baseUrl, `${modelPath(body.model)}:generateContent`),
      { method: "POST", headers: headers(config), body: JSON.stringify(toGoogleRequest(body)) },
      signal,
    );
    // The provider's own object passes on as `native`; parsing keeps only what we read.
    const native = await readJson("google", response);
    const read = parseAnswer("google", responseSchema, native, "response");
    const text = textOf(read);
    const usage = usageOf(read);
    return {
      native,
      text,
      usage,
      openai: {
        id: read.responseId ?? `gen-${Date.now()}`,
        object: "chat.completion",
        created: created(),
        model: read.modelVersion ?? body.model,
        choices: [
          {
            index: 0,
            message: { role: "assistant", content: text },
            finish_reason: finishReason(read.candidates[0]?.finishReason) ?? "stop",
          },
        ],
        ...(usage ? { usage: openAiUsage(usage) } : {}),
      },
    };
  },

  async chatStream(config, body, signal) {
    const response = await googleFetch(
      joinUrl(config.baseUrl, `${modelPath(body.model)}:streamGenerateContent?alt=sse`),
      {
        method: "POST",
        headers: { ...headers(config), accept: "text/event-stream" },
        body: JSON.stringify(toGoogleRequest(body)),
      },
      signal,
    );
    if (!response.body) throw new Error("google: streaming response without a body");
    const id = `gen-${Date.now()}`;
    let usage: Usage | null = null;
    let text = "";
    let stop: string | null = null;
    let first = true;
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
      id,
      object: "chat.completion.chunk",
      created: created(),
      model: body.model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
    return translateSse(
      "google",
      response.body,
      ({ data }, emit) => {
        const event = parseAnswer("google", streamEventSchema, JSON.parse(data), "stream event");
        if (event.error) throw new Error(event.error.message ?? "stream error");
        usage = usageOf(event) ?? usage;
        const delta = textOf(event);
        stop = finishReason(event.candidates?.[0]?.finishReason) ?? stop;
        if (first) {
          emit(chunk({ role: "assistant", content: "" }));
          first = false;
        }
        if (delta) {
          text += delta;
          emit(chunk({ content: delta }));
        }
      },
      (emit) => {
        emit(chunk({}, stop ?? "stop"));
        const u: Usage | null = usage;
        if (u) {
          emit({
            id,
            object: "chat.completion.chunk",
            created: created(),
            model: body.model,
            choices: [],
            usage: openAiUsage(u),
          });
        }
      },
      () => ({ usage, text }),
    );
  },
};
