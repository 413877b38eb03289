// What every provider client shares: the provider names, the OpenAI-shaped request the layer
// speaks internally, the error type that tells transient failures from permanent ones, and
// small HTTP and server-sent-events helpers. Clients are plain fetch (docs/decisions/0020):
// `globalThis.fetch` is looked up on every call, so msw intercepts it in tests.

export const providerNames = ["openai", "anthropic", "google", "openrouter"] as const;
export type ProviderName = (typeof providerNames)[number];

export const isProviderName = (value: string): value is ProviderName =>
  (providerNames as readonly string[]).includes(value);

export interface ProviderConfig {
  name: ProviderName;
  apiKey: string | undefined;
  baseUrl: string;
  /** The base URL is not the vendor's: a local OpenAI-compatible server (free, keyless). */
  custom: boolean;
}

export interface ChatMessage {
  role: string;
  content?: unknown;
  [key: string]: unknown;
}

/** An OpenAI chat-completions body; `model` is the provider's own model id. */
export interface ChatBody {
  model: string;
  messages: ChatMessage[];
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  stream?: boolean;
  [key: string]: unknown;
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
}

/** Usage in OpenAI's wire shape, for answers translated from other providers. */
export const openAiUsage = (u: Usage) => ({
  prompt_tokens: u.promptTokens,
  completion_tokens: u.completionTokens,
  total_tokens: u.promptTokens + u.completionTokens,
});

export interface Completion {
  /** The provider's own response body, untouched. */
  native: unknown;
  /** The same answer as an OpenAI chat.completion object. */
  openai: Record<string, unknown>;
  usage: Usage | null;
  /** The assistant's text, for counting tokens when the provider reports no usage. */
  text: string;
}

export interface StreamCompletion {
  /** OpenAI chat.completion.chunk events as server-sent events, ending with `data: [DONE]`. */
  stream: ReadableStream<Uint8Array>;
  /** Settles when the stream ends (or is cancelled): the usage and the text produced. */
  done: Promise<{ usage: Usage | null; text: string; error?: string }>;
}

export interface ListedModel {
  modelId: string;
  name?: string;
  description?: string;
  contextLength?: number;
  /** micro-USD per million tokens (= pico-USD per token), when the listing carries prices. */
  pricing?: { prompt: bigint; completion: bigint };
  capabilities?: string[];
}

export interface ProviderClient {
  listModels(config: ProviderConfig, signal: AbortSignal): Promise<ListedModel[]>;
  chat(config: ProviderConfig, body: ChatBody, signal: AbortSignal): Promise<Completion>;
  chatStream(
    config: ProviderConfig,
    body: ChatBody,
    signal: AbortSignal,
  ): Promise<StreamCompletion>;
}

const TRANSIENT_STATUSES = new Set([408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529]);

/**
 * A provider call that failed. `status` is the provider's HTTP status (0: no response —
 * network error or timeout). Transient errors are retried on the same provider; any error but a
 * client error (`clientError`: the request itself was refused) moves on to the next provider.
 */
export class ProviderError extends Error {
  readonly provider: ProviderName;
  readonly status: number;
  readonly transient: boolean;
  readonly clientError: boolean;

  constructor(provider: ProviderName, status: number, message: string) {
    super(message);
    this.name = "ProviderError";
    this.provider = provider;
    this.status = status;
    this.transient = status === 0 || TRANSIENT_STATUSES.has(status);
    // 400/413/422: the provider rejects the request itself; another provider would too.
    this.clientError = status === 400 || status === 413 || status === 422;
  }
}

function errorMessageOf(body: unknown): string | undefined {
  if (!body || typeof body !== "object") return undefined;
  const error = (body as { error?: unknown }).error;
  if (typeof error === "string") return error;
  if (error && typeof error === "object") {
    const message = (error as { message?: unknown }).message;
    if (typeof message === "string") return message;
  }
  const message = (body as { message?: unknown }).message;
  return typeof message === "string" ? message : undefined;
}

/** fetch with the provider's error mapping: any non-2xx or network failure is a ProviderError. */
export async function providerFetch(
  provider: ProviderName,
  url: string,
  init: RequestInit,
  signal: AbortSignal,
): Promise<Response> {
  let response: Response;
  try {
    response = await globalThis.fetch(url, { ...init, signal });
  } catch (error) {
    const reason =
      signal.aborted && signal.reason instanceof Error && signal.reason.name === "TimeoutError"
        ? "timed out"
        : (error as Error).message;
    throw new ProviderError(provider, 0, `${provider}: ${reason}`);
  }
  if (!response.ok) {
    const text = await response.text().catch(() => "");
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const detail = errorMessageOf(parsed) ?? (text.slice(0, 200) || response.statusText);
    throw new ProviderError(provider, response.status, `${provider} ${response.status}: ${detail}`);
  }
  return response;
}

/** Reads a JSON body; a body that is not JSON is a provider failure (status 502). */
export async function readJson(provider: ProviderName, response: Response): Promise<unknown> {
  const text = await response.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new ProviderError(provider, 502, `${provider}: response is not JSON`);
  }
}

export function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, "")}/${path.replace(/^\/+/, "")}`;
}

/** The text of an OpenAI message content: a string, or the text parts of a content array. */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) =>
        part && typeof part === "object" && typeof (part as { text?: unknown }).text === "string"
          ? (part as { text: string }).text
          : "",
      )
      .join("");
  }
  return "";
}

export interface SseEvent {
  event: string | undefined;
  data: string;
}

/** Incremental server-sent-events parser: feed it decoded text, get whole events back. */
export function sseParser(onEvent: (event: SseEvent) => void) {
  let buffer = "";
  const flushBlock = (block: string) => {
    let event: string | undefined;
    const data: string[] = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith("data:")) data.push(line.slice(line.charAt(5) === " " ? 6 : 5));
      else if (line.startsWith("event:")) event = line.slice(6).trim();
    }
    if (data.length > 0) onEvent({ event, data: data.join("\n") });
  };
  return {
    push(text: string) {
      buffer += text;
      for (;;) {
        const match = /\r?\n\r?\n/.exec(buffer);
        if (!match) break;
        flushBlock(buffer.slice(0, match.index));
        buffer = buffer.slice(match.index + match[0].length);
      }
    },
    end() {
      if (buffer.trim()) flushBlock(buffer);
      buffer = "";
    },
  };
}

const encoder = new TextEncoder();
export const sseData = (value: unknown): Uint8Array =>
  encoder.encode(`data: ${typeof value === "string" ? value : JSON.stringify(value)}\n\n`);

/**
 * Turns a provider's SSE body into OpenAI chunks: `translate` maps each upstream event to zero
 * or more OpenAI chunk objects and records usage/text on the side. Ends with `data: [DONE]`.
 */
export function translateSse(
  provider: ProviderName,
  body: ReadableStream<Uint8Array>,
  translate: (event: SseEvent, emit: (chunk: unknown) => void) => void,
  finish: (emit: (chunk: unknown) => void) => void,
  result: () => { usage: Usage | null; text: string },
): StreamCompletion {
  let settle!: (value: { usage: Usage | null; text: string; error?: string }) => void;
  const done = new Promise<{ usage: Usage | null; text: string; error?: string }>((r) => {
    settle = r;
  });
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let failure: string | undefined;
  let emit: (chunk: unknown) => void = () => {};
  const parser = sseParser((event) => {
    try {
      translate(event, emit);
    } catch (error) {
      failure = `${provider}: ${(error as Error).message}`;
    }
  });
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      emit = (chunk: unknown) => controller.enqueue(sseData(chunk));
    },
    async pull(controller) {
      try {
        const { done: ended, value } = await reader.read();
        if (ended) {
          parser.end();
          finish(emit);
          controller.enqueue(sseData("[DONE]"));
          controller.close();
          settle({ ...result(), error: failure });
          return;
        }
        parser.push(decoder.decode(value, { stream: true }));
      } catch (error) {
        failure = `${provider}: ${(error as Error).message}`;
        controller.error(error);
        settle({ ...result(), error: failure });
      }
    },
    async cancel(reason) {
      settle({ ...result(), error: "client disconnected" });
      await reader.cancel(reason).catch(() => {});
    },
  });
  return { stream, done };
}
