import {
  type ChatBody,
  type Completion,
  contentText,
  joinUrl,
  type ListedModel,
  type ProviderClient,
  type ProviderConfig,
  type ProviderName,
  providerFetch,
  readJson,
  readJsonText,
  type StreamCompletion,
  sourceStream,
  sseParser,
  type Usage,
} from "./shared.server.ts";

// OpenAI's chat-completions wire format, also spoken by OpenRouter and by local servers
// (Ollama, llama.cpp, vLLM) behind OPENAI_BASE_URL. Requests and responses pass through
// untouched apart from the model id; streams are forwarded byte for byte while a tap reads the
// usage chunk (`stream_options.include_usage`) on the side.

export const OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1";

function headers(
  config: ProviderConfig,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    "content-type": "application/json",
    ...(config.apiKey ? { authorization: `Bearer ${config.apiKey}` } : {}),
    ...extra,
  };
}

export function usageOf(body: unknown): Usage | null {
  const usage = (body as { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } })
    ?.usage;
  if (
    !usage ||
    typeof usage.prompt_tokens !== "number" ||
    typeof usage.completion_tokens !== "number"
  ) {
    return null;
  }
  return { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens };
}

function textOf(body: unknown): string {
  const choices = (body as { choices?: Array<{ message?: { content?: unknown } }> })?.choices;
  return Array.isArray(choices)
    ? choices.map((c) => contentText(c?.message?.content)).join("")
    : "";
}

/** Reads usage and text from an OpenAI SSE stream while passing its bytes through unchanged. */
export function tapOpenAiStream(body: AsyncIterable<Uint8Array>): StreamCompletion {
  let usage: Usage | null = null;
  let text = "";
  let settle!: (value: { usage: Usage | null; text: string; error?: string }) => void;
  const done = new Promise<{ usage: Usage | null; text: string; error?: string }>((r) => {
    settle = r;
  });
  const decoder = new TextDecoder();
  const parser = sseParser(({ data }) => {
    if (data === "[DONE]") return;
    try {
      const chunk = JSON.parse(data) as {
        usage?: unknown;
        choices?: Array<{ delta?: { content?: unknown } }>;
      };
      usage = usageOf(chunk) ?? usage;
      for (const choice of chunk.choices ?? []) text += contentText(choice?.delta?.content);
    } catch {
      // A malformed event is the client's to see; metering falls back to counting.
    }
  });
  const upstream = body[Symbol.asyncIterator]();
  const source: AsyncIterator<Uint8Array> = {
    async next() {
      let read: IteratorResult<Uint8Array>;
      try {
        read = await upstream.next();
      } catch (error) {
        settle({ usage, text, error: (error as Error).message });
        throw error;
      }
      if (read.done) {
        parser.end();
        settle({ usage, text });
        return read;
      }
      parser.push(decoder.decode(read.value, { stream: true }));
      return read;
    },
    async return(reason?: unknown) {
      settle({ usage, text, error: "client disconnected" });
      await upstream.return?.(reason).catch(() => {});
      return { done: true, value: undefined };
    },
  };
  return { stream: sourceStream(source), done };
}

export interface OpenAiCompatibleOptions {
  provider: ProviderName;
  /** Extra request headers (OpenRouter's attribution headers). */
  headers?: () => Record<string, string>;
  /** Maps one entry of `GET /models`'s `data` to a listed model, or drops it. */
  parseModel: (entry: Record<string, unknown>) => ListedModel | undefined;
}

export function openAiCompatibleClient(options: OpenAiCompatibleOptions): ProviderClient {
  const { provider } = options;
  const extra = () => options.headers?.() ?? {};
  return {
    async listModels(config, signal) {
      const response = await providerFetch(
        provider,
        joinUrl(config.baseUrl, "models"),
        { headers: headers(config, extra()) },
        signal,
      );
      const body = (await readJson(provider, response)) as { data?: unknown };
      if (!Array.isArray(body?.data)) {
        throw new Error(`${provider}: model listing has no data array`);
      }
      const models: ListedModel[] = [];
      for (const entry of body.data) {
        if (!entry || typeof entry !== "object" || typeof entry.id !== "string") {
          throw new Error(`${provider}: model listing entry without an id`);
        }
        const model = options.parseModel(entry as Record<string, unknown>);
        if (model) models.push(model);
      }
      return models;
    },

    async chat(config, body: ChatBody, signal): Promise<Completion> {
      const request: ChatBody = { ...body, stream: false };
      delete request.stream_options;
      const response = await providerFetch(
        provider,
        joinUrl(config.baseUrl, "chat/completions"),
        { method: "POST", headers: headers(config, extra()), body: JSON.stringify(request) },
        signal,
      );
      const { value, text: raw } = await readJsonText(provider, response);
      const native = value as Record<string, unknown>;
      if (!Array.isArray(native?.choices)) {
        throw new Error(`${provider}: chat completion without choices`);
      }
      return { native, openai: native, usage: usageOf(native), text: textOf(native), raw };
    },

    async chatStream(config, body: ChatBody, signal): Promise<StreamCompletion> {
      const streamOptions =
        body.stream_options && typeof body.stream_options === "object" ? body.stream_options : {};
      const request = {
        ...body,
        stream: true,
        stream_options: { ...streamOptions, include_usage: true },
      };
      const response = await providerFetch(
        provider,
        joinUrl(config.baseUrl, "chat/completions"),
        {
          method: "POST",
          headers: headers(config, { accept: "text/event-stream", ...extra() }),
          body: JSON.stringify(request),
        },
        signal,
      );
      if (!response.body) throw new Error(`${provider}: streaming response without a body`);
      return tapOpenAiStream(response.body);
    },
  };
}

/** OpenAI's listing has neither prices nor context lengths: the price table supplies them. */
export const openaiClient = openAiCompatibleClient({
  provider: "openai",
  parseModel: (entry) => ({ modelId: entry.id as string }),
});
