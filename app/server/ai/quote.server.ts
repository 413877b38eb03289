import { boundsFor, candidatesFor } from "./completions.server.ts";
import type { ChatBody } from "./providers/shared.server.ts";
import type { TaskType } from "./selection.server.ts";

// What a completion can cost at most before it is made, for callers that are paid up front
// (the paid gateway's x402 price, docs/decisions/0199): the same bound the layer holds from
// credits (completions.server.ts boundsFor: the prompt's byte bound and max_tokens, at the
// priciest provider that may serve the model), with the model pinned so the call that runs is
// the call that was quoted.

export interface CompletionQuote {
  /** The catalog id the call is pinned to (the task's pick when the body named none). */
  model: string;
  /** The most the call can cost, in micro-USD: what a hold for it takes. */
  maxCostMicroUsd: number;
}

export async function quoteCompletion(
  body: ChatBody & { max_tokens: number },
  taskType?: TaskType,
): Promise<CompletionQuote> {
  const [chosen] = await candidatesFor({ body, taskType });
  const pinned = { ...body, model: chosen!.id };
  // Quoted as it will be sent: the models the pinned id resolves to, its bytes in the prompt.
  const { hold } = boundsFor(await candidatesFor({ body: pinned }), pinned, body.max_tokens);
  return { model: pinned.model, maxCostMicroUsd: hold };
}
