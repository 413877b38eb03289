import { z } from "zod";
import {
  type ChatBody,
  type Completion,
  contentText,
  isRecord,
  joinUrl,
  type ListedModel,
  listedEntry,
  type ProviderClient,
  type ProviderConfig,
  type ProviderName,
  parseAnswer,
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

// What we read of OpenAI's answers (the answer itself passes on untouched). A usage object
// without both counts is no usage (metering then counts), as is a stream chunk's `usage: null`.
const usageSchema = z
  .object({ prompt_tokens: z.number(), completion_tokens: z.number() })
  .nullish()
  .catch(null);
const completionSchema = z.object({
  choices: z.array(z.object({ message: z.object({ content: z.unknown() }).nullish() }).nullish()),
  usage: usageSchema,
});
const chunkSchema = z.object({
  choices: z
    .array(z.object({ delta: z.object({ content: z.unknown() }).nullish() }).nullish())
    .nullish(),
  usage: usageSchema,
});
const listingSchema = z.object({ data: z.array(listedEntry) });

type OpenAiUsage = z.output<typeof usageSchema>;

export function usageOf(body: { usage?: OpenAiUsage }): Usage | null {
  const usage = body.usage;
  return usage
    ? { promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens }
    : null;
}

/** Reads usage and text from an OpenAI SSE stream while passing its bytes through unchanged. */
export function tapOpenAiStream(body: AsyncIterable<Uint8Array>): StreamCompletion {
  let usage: Usage | null = null;
  let text = "";
  let firstChunkAt: number | undefined;
  type Done = { usage: Usage | null; text: string; error?: string; firstChunkAt?: number };
  let settle!: (value: Done) => void;
  const done = new Promise<Done>((r) => {
    settle = r;
  });
  const decoder = new TextDecoder();
  const parser = sseParser(({ data }) => {
    if (data === "[DONE]") return;
    try {
      const chunk = chunkSchema.safeParse(JSON.parse(data));
      if (!chunk.success) return;
      usage = usageOf(chunk.data) ?? usage;
      for (const choice of chunk.data.choices ?? []) text += contentText(choice?.delta?.content);
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
        settle({ usage, text, error: (error as Error).message, firstChunkAt });
        throw error;
      }
      if (read.done) {
        parser.end();
        settle({ usage, text, firstChunkAt });
        return read;
      }
      firstChunkAt ??= performance.now();
      parser.push(decoder.decode(read.value, { stream: true }));
      return read;
    },
    async return(reason?: unknown) {
      settle({ usage, text, error: "client disconnected", firstChunkAt });
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
  parseModel: (entry: z.output<typeof listedEntry>) => ListedModel | undefined;
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
      const body = await readJson(provider, response);
      const listing = parseAnswer(provider, listingSchema, body, "model listing");
      const models: ListedModel[] = [];
      for (const entry of listing.data) {
        const model = options.parseModel(entry);
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
      const read = parseAnswer(provider, completionSchema, value, "chat completion");
      const text = read.choices.map((c) => contentText(c?.message?.content)).join("");
      // The provider's own object passes on (parsing keeps only what we read); it parsed as an
      // object just above, so the guard only narrows its type.
      const native = isRecord(value) ? value : {};
      return { native, openai: native, usage: usageOf(read), text, raw };
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
  parseModel: (entry) => ({ modelId: entry.id }),
});
