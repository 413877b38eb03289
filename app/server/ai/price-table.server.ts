import type { ProviderName } from "./providers/shared.server.ts";

// The checked-in price table: list prices in USD per million tokens, as the vendors publish
// them (checked 2025). It prices the models of providers whose listing has no prices (OpenAI,
// Anthropic, Google) and is the catalog's fallback when a listing is unreachable. OpenRouter's
// listing carries its own prices. Update it when vendors change prices; the catalog job does
// not need a deploy for OpenRouter's.

export interface PriceTableEntry {
  provider: Exclude<ProviderName, "openrouter">;
  modelId: string;
  name: string;
  description: string;
  contextLength: number;
  /** USD per 1M prompt tokens */
  prompt: string;
  /** USD per 1M completion tokens */
  completion: string;
  capabilities: string[];
  featured?: boolean;
}

export const priceTable: PriceTableEntry[] = [
  {
    provider: "openai",
    modelId: "gpt-4o",
    name: "GPT-4o",
    description: "OpenAI's versatile multimodal flagship model.",
    contextLength: 128_000,
    prompt: "2.50",
    completion: "10.00",
    capabilities: ["vision"],
    featured: true,
  },
  {
    provider: "openai",
    modelId: "gpt-4o-mini",
    name: "GPT-4o mini",
    description: "Small, fast and inexpensive multimodal model.",
    contextLength: 128_000,
    prompt: "0.15",
    completion: "0.60",
    capabilities: ["vision", "fast"],
    featured: true,
  },
  {
    provider: "openai",
    modelId: "gpt-4.1",
    name: "GPT-4.1",
    description: "Strong at coding and instruction following, with a 1M-token context.",
    contextLength: 1_047_576,
    prompt: "2.00",
    completion: "8.00",
    capabilities: ["vision", "coding"],
    featured: true,
  },
  {
    provider: "openai",
    modelId: "gpt-4.1-mini",
    name: "GPT-4.1 mini",
    description: "Fast, affordable GPT-4.1 with a 1M-token context.",
    contextLength: 1_047_576,
    prompt: "0.40",
    completion: "1.60",
    capabilities: ["vision", "fast", "coding"],
  },
  {
    provider: "openai",
    modelId: "gpt-4.1-nano",
    name: "GPT-4.1 nano",
    description: "The fastest and cheapest GPT-4.1.",
    contextLength: 1_047_576,
    prompt: "0.10",
    completion: "0.40",
    capabilities: ["fast"],
  },
  {
    provider: "openai",
    modelId: "o3",
    name: "o3",
    description: "OpenAI's reasoning model for complex, multi-step problems.",
    contextLength: 200_000,
    prompt: "2.00",
    completion: "8.00",
    capabilities: ["reasoning", "vision", "coding"],
  },
  {
    provider: "openai",
    modelId: "o4-mini",
    name: "o4-mini",
    description: "Fast, cost-efficient reasoning model.",
    contextLength: 200_000,
    prompt: "1.10",
    completion: "4.40",
    capabilities: ["reasoning", "vision", "coding"],
    featured: true,
  },
  {
    provider: "anthropic",
    modelId: "claude-opus-4-20250514",
    name: "Claude Opus 4",
    description: "Anthropic's most capable model for complex reasoning and coding.",
    contextLength: 200_000,
    prompt: "15.00",
    completion: "75.00",
    capabilities: ["reasoning", "coding", "vision"],
  },
  {
    provider: "anthropic",
    modelId: "claude-sonnet-4-20250514",
    name: "Claude Sonnet 4",
    description: "High-performance model balancing intelligence and speed; excellent at coding.",
    contextLength: 200_000,
    prompt: "3.00",
    completion: "15.00",
    capabilities: ["coding", "reasoning", "vision"],
    featured: true,
  },
  {
    provider: "anthropic",
    modelId: "claude-3-7-sonnet-20250219",
    name: "Claude 3.7 Sonnet",
    description: "Hybrid reasoning model with extended thinking.",
    contextLength: 200_000,
    prompt: "3.00",
    completion: "15.00",
    capabilities: ["coding", "reasoning", "vision"],
  },
  {
    provider: "anthropic",
    modelId: "claude-3-5-haiku-20241022",
    name: "Claude 3.5 Haiku",
    description: "Anthropic's fastest model.",
    contextLength: 200_000,
    prompt: "0.80",
    completion: "4.00",
    capabilities: ["fast"],
  },
  {
    provider: "google",
    modelId: "gemini-2.5-pro",
    name: "Gemini 2.5 Pro",
    description: "Google's thinking model for complex problems, with a 1M-token context.",
    contextLength: 1_048_576,
    prompt: "1.25",
    completion: "10.00",
    capabilities: ["reasoning", "coding", "vision"],
    featured: true,
  },
  {
    provider: "google",
    modelId: "gemini-2.5-flash",
    name: "Gemini 2.5 Flash",
    description: "Fast, well-rounded model with thinking.",
    contextLength: 1_048_576,
    prompt: "0.30",
    completion: "2.50",
    capabilities: ["fast", "vision"],
    featured: true,
  },
  {
    provider: "google",
    modelId: "gemini-2.0-flash",
    name: "Gemini 2.0 Flash",
    description: "Low-latency multimodal model.",
    contextLength: 1_048_576,
    prompt: "0.10",
    completion: "0.40",
    capabilities: ["fast", "vision"],
  },
  {
    provider: "google",
    modelId: "gemini-2.0-flash-lite",
    name: "Gemini 2.0 Flash-Lite",
    description: "The most cost-efficient Gemini model.",
    contextLength: 1_048_576,
    prompt: "0.075",
    completion: "0.30",
    capabilities: ["fast"],
  },
];
