import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import { z } from "zod";
import { withDirectSource } from "../../platform/web/node-http.server.ts";

// What every provider client shares: the provider names, the OpenAI-shaped request the layer
// speaks internally, the error type that tells transient failures from permanent ones, and
// small HTTP and server-sent-events helpers. Clients speak plain HTTP (docs/decisions/0020) over
// node:http with keep-alive pools rather than fetch: undici's Request/Response/Web-stream
// machinery cost more CPU per call than the whole platform logic (docs/decisions/0026).
// `http.request` is looked up on every call, so msw (its ClientRequest interceptor) still
// intercepts it in tests.

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
  /** The provider's body as received, when `openai` is exactly it (passed on unserialised). */
  raw?: string;
}

export interface StreamCompletion {
  /** OpenAI chat.completion.chunk events as server-sent events, ending with `data: [DONE]`. */
  stream: ReadableStream<Uint8Array>;
  /**
   * Settles when the stream ends (or is cancelled): the usage and the text produced, and when
   * (performance.now()) the provider's first chunk arrived, if one did.
   */
  done: Promise<{ usage: Usage | null; text: string; error?: string; firstChunkAt?: number }>;
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

// A refusal's body: `{error: "…"}`, `{error: {message}}` (OpenAI, Anthropic, Google) or
// `{message}`; anything else leaves the raw text as the detail.
const text = z.string().optional().catch(undefined);
const errorBodySchema = z.object({
  error: z
    .union([z.string(), z.object({ message: text })])
    .optional()
    .catch(undefined),
  message: text,
});

function errorMessageOf(body: unknown): string | undefined {
  const parsed = errorBodySchema.safeParse(body);
  if (!parsed.success) return undefined;
  const { error, message } = parsed.data;
  return (typeof error === "string" ? error : error?.message) ?? message;
}

export interface ProviderRequestInit {
  method?: "GET" | "POST";
  headers: Record<string, string>;
  body?: string;
}

/** A provider's answer: status and headers, and its body as a Node stream (bytes as they come). */
export interface ProviderResponse {
  status: number;
  headers: IncomingMessage["headers"];
  body: IncomingMessage;
  /** The whole body as text. */
  text(): Promise<string>;
}

// One keep-alive pool per scheme: connections to a provider are reused across calls (no TCP or
// TLS handshake per call). No cap on parallel calls (a stream may last minutes, and thousands
// of agents stream at once); up to 256 idle connections per provider are kept. A call that
// races a connection the provider is closing fails with a network error, which is transient
// (retried).
const agents = {
  "http:": new http.Agent({ keepAlive: true, maxFreeSockets: 256 }),
  "https:": new https.Agent({ keepAlive: true, maxFreeSockets: 256 }),
};

// Listeners rather than `for await`: no async iterator and a promise per chunk on every call.
function readText(body: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let ended = false;
    body.on("data", (chunk: Buffer) => chunks.push(chunk));
    body.once("end", () => {
      ended = true;
      resolve((chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString("utf8"));
    });
    body.once("error", reject);
    // Torn down mid-body (abort, reset) without an error event: a failure all the same.
    body.once("close", () => {
      if (!ended) reject(new Error("the response was cut off"));
    });
  });
}

function send(url: string, init: ProviderRequestInit, signal: AbortSignal) {
  return new Promise<IncomingMessage>((resolve, reject) => {
    const target = new URL(url);
    const secure = target.protocol === "https:";
    if (!secure && target.protocol !== "http:") {
      reject(new Error(`unsupported URL scheme ${target.protocol}`));
      return;
    }
    const body = init.body === undefined ? undefined : Buffer.from(init.body);
    const headers = body
      ? { ...init.headers, "content-length": String(body.byteLength) }
      : init.headers;
    const options = {
      method: init.method ?? "GET",
      headers,
      agent: agents[secure ? "https:" : "http:"],
    };
    const onResponse = (res: IncomingMessage) => {
      // Failures after this point (abort, reset) reach whoever reads the body; without a
      // listener an unread body's error would be uncaught.
      res.on("error", () => {});
      resolve(res);
    };
    const req = secure
      ? https.request(target, options, onResponse)
      : http.request(target, options, onResponse);
    req.on("error", reject);
    // Aborting (timeout, client gone) destroys the call, also mid-stream. A plain listener, not
    // the `signal` option: that one adds an end-of-stream watcher per call.
    const onAbort = () => req.destroy(signal.reason instanceof Error ? signal.reason : undefined);
    if (signal.aborted) onAbort();
    else {
      signal.addEventListener("abort", onAbort, { once: true });
      req.once("close", () => signal.removeEventListener("abort", onAbort));
    }
    // Headers and body leave in one write.
    req.end(body);
  });
}

/** One HTTP call with the provider's error mapping: any non-2xx or network failure is a ProviderError. */
export async function providerFetch(
  provider: ProviderName,
  url: string,
  init: ProviderRequestInit,
  signal: AbortSignal,
): Promise<ProviderResponse> {
  let body: IncomingMessage;
  try {
    body = await send(url, init, signal);
  } catch (error) {
    const reason =
      signal.aborted && signal.reason instanceof Error && signal.reason.name === "TimeoutError"
        ? "timed out"
        : (error as Error).message;
    throw new ProviderError(provider, 0, `${provider}: ${reason}`);
  }
  const status = body.statusCode ?? 0;
  if (status < 200 || status > 299) {
    const text = await readText(body).catch(() => "");
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const detail = errorMessageOf(parsed) ?? (text.slice(0, 200) || body.statusMessage || "");
    throw new ProviderError(provider, status, `${provider} ${status}: ${detail}`);
  }
  return { status, headers: body.headers, body, text: () => readText(body) };
}

/** Reads a JSON body, also as text; a body that is not JSON is a provider failure (status 502). */
export async function readJsonText(
  provider: ProviderName,
  response: ProviderResponse,
): Promise<{ value: unknown; text: string }> {
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    throw new ProviderError(provider, 0, `${provider}: ${(error as Error).message}`);
  }
  try {
    return { value: JSON.parse(text), text };
  } catch {
    throw new ProviderError(provider, 502, `${provider}: response is not JSON`);
  }
}

/** Reads a JSON body; a body that is not JSON is a provider failure (status 502). */
export async function readJson(
  provider: ProviderName,
  response: ProviderResponse,
): Promise<unknown> {
  return (await readJsonText(provider, response)).value;
}

/**
 * Checks a provider's JSON answer against the part of it we read (schemas in each provider
 * module: parse only what is read, the rest passes through untouched). An answer of another
 * shape is a provider failure (502), like one that is not JSON.
 */
export function parseAnswer<S extends z.ZodType>(
  provider: ProviderName,
  schema: S,
  value: unknown,
  what: string,
): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const where = issue?.path.length ? ` at ${issue.path.join(".")}` : "";
  throw new ProviderError(
    provider,
    502,
    `${provider}: unexpected ${what}${where}: ${issue?.message}`,
  );
}

/** An optional descriptive field of a listing: a value of the wrong type is left out. */
export const optionalOf = <T extends z.ZodType>(schema: T) => schema.optional().catch(undefined);

/** A model listing's entry: its id, and whatever else the provider module reads. */
export const listedEntry = z.looseObject({ id: z.string() });

export function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, "")}/${path.replace(/^\/+/, "")}`;
}

/** A JSON object (the provider modules read its fields with zod or typeof guards). */
export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** The text of an OpenAI message content: a string, or the text parts of a content array. */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part: unknown) => (isRecord(part) && typeof part.text === "string" ? part.text : ""))
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
 * A ReadableStream over `source`, pulled only when read (high-water mark 0), and registered with
 * the server entry, which writes `source`'s chunks straight to the socket instead
 * (node-http.server.ts). Either way each chunk goes out as soon as the provider sent it.
 */
export function sourceStream(source: AsyncIterator<Uint8Array>): ReadableStream<Uint8Array> {
  const stream = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const { done, value } = await source.next();
          if (done) controller.close();
          else controller.enqueue(value);
        } catch (error) {
          controller.error(error);
        }
      },
      async cancel(reason) {
        await source.return?.(reason);
      },
    },
    { highWaterMark: 0 },
  );
  return withDirectSource(stream, source);
}

type StreamResult = { usage: Usage | null; text: string; error?: string; firstChunkAt?: number };

/**
 * Turns a provider's SSE body into OpenAI chunks: `translate` maps each upstream event to zero
 * or more OpenAI chunk objects and records usage/text on the side. Ends with `data: [DONE]`.
 */
export function translateSse(
  provider: ProviderName,
  body: AsyncIterable<Uint8Array>,
  translate: (event: SseEvent, emit: (chunk: unknown) => void) => void,
  finish: (emit: (chunk: unknown) => void) => void,
  result: () => { usage: Usage | null; text: string },
): StreamCompletion {
  let settle!: (value: StreamResult) => void;
  const done = new Promise<StreamResult>((r) => {
    settle = r;
  });
  const upstream = body[Symbol.asyncIterator]();
  const decoder = new TextDecoder();
  let failure: string | undefined;
  let out: Uint8Array[] = [];
  let ended = false;
  let firstChunkAt: number | undefined;
  const emit = (chunk: unknown) => out.push(sseData(chunk));
  const parser = sseParser((event) => {
    try {
      translate(event, emit);
    } catch (error) {
      failure = `${provider}: ${(error as Error).message}`;
    }
  });
  const take = (): IteratorResult<Uint8Array> => {
    const value = out.length === 1 ? out[0]! : Buffer.concat(out);
    out = [];
    return { done: false, value };
  };
  const source: AsyncIterator<Uint8Array> = {
    async next() {
      // Reads upstream until at least one OpenAI chunk is ready; what one read yields goes out
      // as one write.
      while (out.length === 0) {
        if (ended) return { done: true, value: undefined };
        let read: IteratorResult<Uint8Array>;
        try {
          read = await upstream.next();
        } catch (error) {
          failure = `${provider}: ${(error as Error).message}`;
          ended = true;
          settle({ ...result(), error: failure, firstChunkAt });
          throw error;
        }
        if (read.done) {
          parser.end();
          finish(emit);
          out.push(sseData("[DONE]"));
          ended = true;
          settle({ ...result(), error: failure, firstChunkAt });
        } else {
          firstChunkAt ??= performance.now();
          parser.push(decoder.decode(read.value, { stream: true }));
        }
      }
      return take();
    },
    async return(reason?: unknown) {
      ended = true;
      settle({ ...result(), error: "client disconnected", firstChunkAt });
      await upstream.return?.(reason).catch(() => {});
      return { done: true, value: undefined };
    },
  };
  return { stream: sourceStream(source), done };
}
