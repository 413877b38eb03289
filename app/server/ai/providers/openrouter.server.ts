import { usdPerTokenToPrice } from "../money.server.ts";
import { openAiCompatibleClient } from "./openai.server.ts";
import type { ListedModel } from "./shared.server.ts";

// OpenRouter speaks OpenAI's chat-completions format; its model listing (GET /models) carries
// context lengths and per-token prices in USD as decimal strings ("0.0000025").

export const OPENROUTER_DEFAULT_BASE_URL = "https://openrouter.ai/api/v1";

function parseModel(entry: Record<string, unknown>): ListedModel | undefined {
  const pricing = entry.pricing as { prompt?: unknown; completion?: unknown } | undefined;
  if (typeof pricing?.prompt !== "string" || typeof pricing?.completion !== "string") {
    throw new Error(`openrouter: model ${entry.id} has no prompt/completion pricing`);
  }
  // Routers with variable prices ("-1", e.g. openrouter/auto) cannot be metered: not offered.
  if (pricing.prompt.startsWith("-") || pricing.completion.startsWith("-")) return undefined;
  const architecture = entry.architecture as { input_modalities?: unknown } | undefined;
  const inputs = Array.isArray(architecture?.input_modalities)
    ? (architecture.input_modalities as unknown[])
    : [];
  return {
    modelId: entry.id as string,
    name: typeof entry.name === "string" ? entry.name : undefined,
    description: typeof entry.description === "string" ? entry.description : undefined,
    contextLength: typeof entry.context_length === "number" ? entry.context_length : undefined,
    pricing: {
      prompt: usdPerTokenToPrice(pricing.prompt),
      completion: usdPerTokenToPrice(pricing.completion),
    },
    capabilities: inputs.includes("image") ? ["vision"] : [],
  };
}

export const openrouterClient = openAiCompatibleClient({
  provider: "openrouter",
  headers: () => ({ "x-title": "Agent Platform" }),
  parseModel,
});
