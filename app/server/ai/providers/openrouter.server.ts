import { z } from "zod";
import { usdPerTokenToPrice } from "../money.server.ts";
import { openAiCompatibleClient } from "./openai.server.ts";
import { type ListedModel, type listedEntry, optionalOf, parseAnswer } from "./shared.server.ts";

// OpenRouter speaks OpenAI's chat-completions format; its model listing (GET /models) carries
// context lengths and per-token prices in USD as decimal strings ("0.0000025").

export const OPENROUTER_DEFAULT_BASE_URL = "https://openrouter.ai/api/v1";

// What we read of a listing entry; descriptive fields of the wrong type are left out, a missing
// price is a provider failure (the model could not be metered).
const entrySchema = z.object({
  id: z.string(),
  name: optionalOf(z.string()),
  description: optionalOf(z.string()),
  context_length: optionalOf(z.number()),
  pricing: z.object({ prompt: z.string(), completion: z.string() }),
  architecture: optionalOf(z.object({ input_modalities: optionalOf(z.array(z.unknown())) })),
});

function parseModel(listed: z.output<typeof listedEntry>): ListedModel | undefined {
  const entry = parseAnswer("openrouter", entrySchema, listed, `model ${listed.id}`);
  const { pricing } = entry;
  // Routers with variable prices ("-1", e.g. openrouter/auto) cannot be metered: not offered.
  if (pricing.prompt.startsWith("-") || pricing.completion.startsWith("-")) return undefined;
  const inputs = entry.architecture?.input_modalities ?? [];
  return {
    modelId: entry.id,
    name: entry.name,
    description: entry.description,
    contextLength: entry.context_length,
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
