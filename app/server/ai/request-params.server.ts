import { DomainError } from "../platform/errors.server.ts";
import type { ChatBody, ProviderName } from "./providers/shared.server.ts";

// The request parameters a completion may carry, per provider: OpenAI's chat-completions
// parameters whose cost is the tokens the layer holds for and meters (docs/decisions/0199).
// Anything else is refused before a provider is called, because the OpenAI-compatible clients
// forward the body as it came and some parameters spend beyond the hold: OpenRouter's `models`
// (fallbacks to pricier models), `plugins` (paid web search), `provider`; OpenAI's
// `service_tier` (priority pricing), `modalities`/`audio` (audio tokens), `prediction` (rejected
// prediction tokens), `web_search_options` (per-search fees).

/** What every provider accepts: the shape, sampling and tool parameters, all priced per token. */
const COMMON = [
  "model",
  "messages",
  "stream",
  "stream_options",
  "max_tokens",
  "max_completion_tokens",
  "n",
  "temperature",
  "top_p",
  "stop",
  "presence_penalty",
  "frequency_penalty",
  "seed",
  "user",
  "response_format",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "functions",
  "function_call",
  "logit_bias",
  "logprobs",
  "top_logprobs",
  // Sent by OpenClaw's OpenAI-completions transport; neither adds a cost (store: false is what
  // it sends, and a cache key only makes cached prompt tokens likelier, which are cheaper).
  "store",
  "prompt_cache_key",
  // Reasoning tokens are completion tokens, bounded by max_(completion_)tokens like the rest.
  "reasoning_effort",
] as const;

/**
 * Per provider. Anthropic's and Google's clients translate the request and read only the fields
 * they map (the rest never leaves the platform), so they take the same list.
 */
export const ALLOWED_PARAMS: Record<ProviderName, ReadonlySet<string>> = {
  openai: new Set(COMMON),
  openrouter: new Set(COMMON),
  anthropic: new Set(COMMON),
  google: new Set(COMMON),
};

/**
 * 400 `unsupported parameter: <name>` for the first parameter of `body` that one of the
 * providers that may serve the call does not allow (a fallback must not spend what the first
 * choice would not).
 */
export function checkParams(body: ChatBody, providers: Iterable<ProviderName>): void {
  const sets = [...new Set(providers)].map((p) => ALLOWED_PARAMS[p]);
  for (const name of Object.keys(body)) {
    if (body[name] === undefined) continue;
    if (sets.some((allowed) => !allowed.has(name))) {
      throw new DomainError(400, `unsupported parameter: ${name}`);
    }
  }
}
