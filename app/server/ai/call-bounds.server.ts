import { costPico, PICO_PER_MICRO, type Prices } from "./money.server.ts";
import type { ChatBody, ProviderName } from "./providers/shared.server.ts";

// The most a call can cost, as a bound an honest provider's reported usage cannot exceed, so the
// hold taken before the call always covers what it is charged (docs/decisions/0096):
// - prompt tokens ≤ the request's UTF-8 bytes (a token is at least one byte in the byte-level BPE
//   and SentencePiece-with-byte-fallback tokenizers the providers use) plus what the provider
//   adds per message, per request and for tool definitions; never more than the context window;
// - completion tokens ≤ max_tokens (× n choices), which the layer sets itself when the caller
//   did not, to what the balance can pay.

/** Tokens a provider adds per message (role markers, turn separators: OpenAI 3-4, Gemini ~5). */
export const MESSAGE_OVERHEAD_TOKENS = 8;
/** Tokens added once per request (reply priming, BOS). */
export const REQUEST_OVERHEAD_TOKENS = 16;
/** Tokens added when tools are declared (Anthropic's tool-use system prompt: up to 530). */
export const TOOLS_OVERHEAD_TOKENS = 600;

const TEXT_PARTS = new Set(["text", "input_text", "refusal"]);

/** True when a message carries a part whose tokens do not follow its bytes (images, audio, files). */
function hasMedia(body: ChatBody): boolean {
  for (const m of body.messages) {
    if (!Array.isArray(m.content)) continue;
    for (const part of m.content) {
      const type = (part as { type?: unknown } | null)?.type;
      if (typeof type !== "string" || !TEXT_PARTS.has(type)) return true;
    }
  }
  return false;
}

/**
 * Prompt tokens the request can at most be billed for. `contextLength`: the largest context
 * window among the models that may serve it (0 when unknown); a provider refuses a longer prompt.
 * A request with media is bounded by the context window alone (an image's tokens do not follow
 * the length of its URL).
 */
export function promptTokenBound(body: ChatBody, contextLength: number): number {
  const tools =
    (Array.isArray(body.tools) && body.tools.length > 0) ||
    (Array.isArray(body.functions) && body.functions.length > 0);
  const media = hasMedia(body);
  if (media && contextLength > 0) return contextLength;
  // The whole body's bytes: messages, tools, response_format… (its other fields only add slack).
  const bound =
    Buffer.byteLength(JSON.stringify(body), "utf8") +
    body.messages.length * MESSAGE_OVERHEAD_TOKENS +
    REQUEST_OVERHEAD_TOKENS +
    (tools ? TOOLS_OVERHEAD_TOKENS : 0);
  return contextLength > 0 ? Math.min(bound, contextLength) : bound;
}

/** Choices per request (OpenAI's `n`): each one is a completion of up to max_tokens. */
export const choicesOf = (body: ChatBody): number =>
  typeof body.n === "number" && Number.isInteger(body.n) && body.n > 1 ? body.n : 1;

/** The caller's own completion limit (max_tokens or max_completion_tokens), if any. */
export function requestedMaxTokens(body: ChatBody): number | undefined {
  if (typeof body.max_tokens === "number") return body.max_tokens;
  if (typeof body.max_completion_tokens === "number") return body.max_completion_tokens;
  return undefined;
}

/** The hold for a prompt bound and a completion limit: the priciest candidate's cost. */
export function holdFor(prices: Prices[], promptTokens: number, completionTokens: number): number {
  let most = 0n;
  for (const p of prices) {
    const pico = costPico(p, promptTokens, completionTokens);
    if (pico > most) most = pico;
  }
  return Number((most + PICO_PER_MICRO - 1n) / PICO_PER_MICRO);
}

/**
 * The most completion tokens (up to `cap`) a hold of `budget` micro-USD pays for after a prompt
 * of `promptTokens`, at every candidate's prices; 0 when it does not pay for the prompt.
 */
export function affordableTokens(
  prices: Prices[],
  promptTokens: number,
  budget: number,
  cap: number,
): number {
  let tokens = cap;
  const pico = BigInt(budget) * PICO_PER_MICRO;
  for (const p of prices) {
    const left = pico - BigInt(promptTokens) * p.prompt;
    if (left < 0n) return 0;
    if (p.completion > 0n) tokens = Math.min(tokens, Number(left / p.completion));
  }
  return Math.max(0, tokens);
}

/** Providers whose API takes OpenAI's `max_completion_tokens` (o-series models refuse max_tokens). */
const COMPLETION_TOKENS_FIELD: ReadonlySet<ProviderName> = new Set(["openai"]);

/**
 * The request as sent to one provider, with the completion limit the hold was sized for:
 * `limit` when the layer chose it, and for clients that only read max_tokens (Anthropic, Google)
 * the caller's max_completion_tokens copied over.
 */
export function withCompletionLimit(
  request: ChatBody,
  provider: ProviderName,
  custom: boolean,
  limit: number | undefined,
): ChatBody {
  if (limit !== undefined) {
    // A local OpenAI-compatible server (custom base URL) is sent the classic field.
    return COMPLETION_TOKENS_FIELD.has(provider) && !custom
      ? { ...request, max_completion_tokens: limit }
      : { ...request, max_tokens: limit };
  }
  if (
    request.max_tokens === undefined &&
    typeof request.max_completion_tokens === "number" &&
    !(COMPLETION_TOKENS_FIELD.has(provider) || provider === "openrouter")
  ) {
    return { ...request, max_tokens: request.max_completion_tokens };
  }
  return request;
}
