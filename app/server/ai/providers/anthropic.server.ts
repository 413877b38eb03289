import { z } from "zod";
import {
  type ChatBody,
  type ChatMessage,
  type Completion,
  contentText,
  joinUrl,
  type ListedModel,
  openAiUsage,
  optionalOf,
  type ProviderClient,
  type ProviderConfig,
  parseAnswer,
  providerFetch,
  readJson,
  translateSse,
  type Usage,
} from "./shared.server.ts";

// Anthropic's Messages API (POST /v1/messages, anthropic-version 2023-06-01). The layer's
// OpenAI-shaped request is translated (system messages → `system`, max_tokens required); the
// answer is returned as is (`native`) and as an OpenAI chat.completion; a stream is translated
// event by event into OpenAI chunks.

export const ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com";
const VERSION = "2023-06-01";
/** Anthropic requires max_tokens; this is used when the caller sets none. */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096;

function headers(config: ProviderConfig): Record<string, string> {
  return {
    "content-type": "application/json",
    "anthropic-version": VERSION,
    ...(config.apiKey ? { "x-api-key": config.apiKey } : {}),
  };
}

export function toAnthropicRequest(body: ChatBody, stream: boolean) {
  const system = body.messages
    .filter((m) => m.role === "system" || m.role === "developer")
    .map((m) => contentText(m.content))
    .join("\n\n");
  const messages = body.messages
    .filter((m: ChatMessage) => m.role === "user" || m.role === "assistant")
    .map((m) => ({ role: m.role, content: contentText(m.content) }));
  const stop = body.stop;
  return {
    model: body.model,
    max_tokens: body.max_tokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS,
    messages,
    ...(system ? { system } : {}),
    ...(body.temperature !== undefined ? { temperature: body.temperature } : {}),
    ...(body.top_p !== undefined ? { top_p: body.top_p } : {}),
    ...(typeof stop === "string" ? { stop_sequences: [stop] } : {}),
    ...(Array.isArray(stop) ? { stop_sequences: stop } : {}),
    ...(stream ? { stream: true } : {}),
  };
}

const finishReason = (stop: unknown): string | null =>
  stop === "max_tokens"
    ? "length"
    : stop === "tool_use"
      ? "tool_calls"
      : stop === "refusal"
        ? "content_filter"
        : stop
          ? "stop"
          : null;

// What we read of Anthropic's answers. Counts of the wrong type are no counts (metering then
// counts tokens itself).
const count = z.number().optional().catch(undefined);
const usageSchema = z
  .object({ input_tokens: count, output_tokens: count })
  .nullish()
  .catch(undefined);
const messageSchema = z.object({
  id: z.string(),
  model: z.string(),
  content: z.array(z.object({ type: z.string(), text: z.string().optional() })),
  stop_reason: z.string().nullish(),
  usage: usageSchema,
});
const streamEventSchema = z.object({
  type: z.string(),
  message: z
    .object({ id: z.string().optional(), model: z.string().optional(), usage: usageSchema })
    .optional(),
  delta: z
    .object({
      type: z.string().optional(),
      text: z.string().optional(),
      stop_reason: z.string().nullish(),
    })
    .optional(),
  usage: usageSchema,
  error: z.object({ message: z.string().optional() }).optional(),
});
const listingSchema = z.object({
  data: z.array(
    z.object({
      id: z.string(),
      display_name: optionalOf(z.string()),
      max_input_tokens: optionalOf(z.number()),
    }),
  ),
  has_more: optionalOf(z.boolean()),
  last_id: optionalOf(z.string()),
});

function usageOf(message: z.output<typeof messageSchema>): Usage | null {
  const u = message.usage;
  if (u?.input_tokens === undefined || u.output_tokens === undefined) return null;
  return { promptTokens: u.input_tokens, completionTokens: u.output_tokens };
}

const created = () => Math.floor(Date.now() / 1000);

export const anthropicClient: ProviderClient = {
  async listModels(config, signal) {
    const models: ListedModel[] = [];
    let after: string | undefined;
    for (let page = 0; page < 20; page++) {
      const url = new URL(joinUrl(config.baseUrl, "v1/models"));
      url.searchParams.set("limit", "1000");
      if (after) url.searchParams.set("after_id", after);
      const response = await providerFetch(
        "anthropic",
        url.toString(),
        { headers: headers(config) },
        signal,
      );
      const body = parseAnswer(
        "anthropic",
        listingSchema,
        await readJson("anthropic", response),
        "model listing",
      );
      for (const entry of body.data) {
        models.push({
          modelId: entry.id,
          name: entry.display_name,
          contextLength: entry.max_input_tokens,
        });
      }
      if (!body.has_more || !body.last_id) break;
      after = body.last_id;
    }
    return models;
  },

  async chat(config, body, signal): Promise<Completion> {
    const response = await providerFetch(
      "anthropic",
      joinUrl(config.baseUrl, "v1/messages"),
      {
        method: "POST",
        headers: headers(config),
        body: JSON.stringify(toAnthropicRequest(body, false)),
      },
      signal,
    );
    // The provider's own object passes on as `native`; parsing keeps only what we read.
    const native = await readJson("anthropic", response);
    const read = parseAnswer("anthropic", messageSchema, native, "message");
    const text = read.content.map((b) => (b.type === "text" ? (b.text ?? "") : "")).join("");
    const usage = usageOf(read);
    return {
      native,
      text,
      usage,
      openai: {
        id: read.id,
        object: "chat.completion",
        created: created(),
        model: read.model,
        choices: [
          {
            index: 0,
            message: { role: "assistant", content: text },
            finish_reason: finishReason(read.stop_reason),
          },
        ],
        ...(usage ? { usage: openAiUsage(usage) } : {}),
      },
    };
  },

  async chatStream(config, body, signal) {
    const response = await providerFetch(
      "anthropic",
      joinUrl(config.baseUrl, "v1/messages"),
      {
        method: "POST",
        headers: { ...headers(config), accept: "text/event-stream" },
        body: JSON.stringify(toAnthropicRequest(body, true)),
      },
      signal,
    );
    if (!response.body) throw new Error("anthropic: streaming response without a body");
    let id = "msg";
    let model = body.model;
    let input: number | undefined;
    let output: number | undefined;
    let text = "";
    let stop: string | null = null;
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
      id,
      object: "chat.completion.chunk",
      created: created(),
      model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
    return translateSse(
      "anthropic",
      response.body,
      ({ data }, emit) => {
        const event = parseAnswer("anthropic", streamEventSchema, JSON.parse(data), "stream event");
        switch (event.type) {
          case "message_start":
            id = event.message?.id ?? id;
            model = event.message?.model ?? model;
            input = event.message?.usage?.input_tokens;
            output = event.message?.usage?.output_tokens;
            emit(chunk({ role: "assistant", content: "" }));
            break;
          case "content_block_delta":
            if (event.delta?.type === "text_delta" && event.delta.text) {
              text += event.delta.text;
              emit(chunk({ content: event.delta.text }));
            }
            break;
          case "message_delta":
            stop = finishReason(event.delta?.stop_reason);
            output = event.usage?.output_tokens ?? output;
            input = event.usage?.input_tokens ?? input;
            break;
          case "error":
            throw new Error(event.error?.message ?? "stream error");
        }
      },
      (emit) => {
        emit(chunk({}, stop ?? "stop"));
        if (input !== undefined && output !== undefined) {
          emit({
            id,
            object: "chat.completion.chunk",
            created: created(),
            model,
            choices: [],
            usage: openAiUsage({ promptTokens: input, completionTokens: output }),
          });
        }
      },
      () => ({
        usage:
          input !== undefined && output !== undefined
            ? { promptTokens: input, completionTokens: output }
            : null,
        text,
      }),
    );
  },
};
