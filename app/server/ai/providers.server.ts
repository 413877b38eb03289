import { env } from "../platform/env.server.ts";
import { ANTHROPIC_DEFAULT_BASE_URL, anthropicClient } from "./providers/anthropic.server.ts";
import { GOOGLE_DEFAULT_BASE_URL, googleClient } from "./providers/google.server.ts";
import { OPENAI_DEFAULT_BASE_URL, openaiClient } from "./providers/openai.server.ts";
import { OPENROUTER_DEFAULT_BASE_URL, openrouterClient } from "./providers/openrouter.server.ts";
import {
  type ProviderClient,
  type ProviderConfig,
  type ProviderName,
  providerNames,
} from "./providers/shared.server.ts";

// Which providers this deployment has, from the environment: a provider is configured when it
// has an API key, or a base URL other than the vendor's (a local OpenAI-compatible server).

export const clients: Record<ProviderName, ProviderClient> = {
  openai: openaiClient,
  anthropic: anthropicClient,
  google: googleClient,
  openrouter: openrouterClient,
};

const defaults: Record<ProviderName, string> = {
  openai: OPENAI_DEFAULT_BASE_URL,
  anthropic: ANTHROPIC_DEFAULT_BASE_URL,
  google: GOOGLE_DEFAULT_BASE_URL,
  openrouter: OPENROUTER_DEFAULT_BASE_URL,
};

function settingsOf(name: ProviderName): { apiKey?: string; baseUrl?: string } {
  const e = env();
  switch (name) {
    case "openai":
      return { apiKey: e.OPENAI_API_KEY, baseUrl: e.OPENAI_BASE_URL };
    case "anthropic":
      return { apiKey: e.ANTHROPIC_API_KEY, baseUrl: e.ANTHROPIC_BASE_URL };
    case "google":
      return { apiKey: e.GOOGLE_API_KEY, baseUrl: e.GOOGLE_BASE_URL };
    case "openrouter":
      return { apiKey: e.OPENROUTER_API_KEY, baseUrl: e.OPENROUTER_BASE_URL };
  }
}

/** The provider's configuration (whether or not it is configured). */
export function providerSettings(name: ProviderName): ProviderConfig {
  const { apiKey, baseUrl } = settingsOf(name);
  const base = (baseUrl ?? defaults[name]).replace(/\/+$/, "");
  return { name, apiKey, baseUrl: base, custom: base !== defaults[name] };
}

/** Configured providers, in preference order (first-party vendors before the aggregator). */
export function configuredProviders(): ProviderConfig[] {
  return providerNames
    .map(providerSettings)
    .filter((config) => Boolean(config.apiKey) || config.custom);
}

export function configuredProvider(name: ProviderName): ProviderConfig | undefined {
  return configuredProviders().find((c) => c.name === name);
}
