import type { ProviderName } from "./providers/shared.server.ts";
import { clients, configuredProviders } from "./providers.server.ts";

// Whether each configured provider answers: a model listing with a short timeout. Results are
// kept for a few seconds so a health probe hammered by monitors does not hammer the vendors.

const PROBE_TIMEOUT_MS = 5_000;
const CACHE_MS = 10_000;

export interface AiHealth {
  status: "healthy" | "degraded" | "unavailable";
  providers: Partial<Record<ProviderName, boolean>>;
  timestamp: string;
}

let cache: { key: string; at: number; health: Promise<AiHealth> } | undefined;

async function probe(): Promise<AiHealth> {
  const configs = configuredProviders();
  const results = await Promise.all(
    configs.map(async (config) => {
      try {
        await clients[config.name].listModels(config, AbortSignal.timeout(PROBE_TIMEOUT_MS));
        return [config.name, true] as const;
      } catch {
        return [config.name, false] as const;
      }
    }),
  );
  const up = results.filter(([, ok]) => ok).length;
  return {
    status: up === 0 ? "unavailable" : up === results.length ? "healthy" : "degraded",
    providers: Object.fromEntries(results),
    timestamp: new Date().toISOString(),
  };
}

export function aiHealth(): Promise<AiHealth> {
  const key = configuredProviders()
    .map((c) => `${c.name}@${c.baseUrl}`)
    .join(",");
  if (!cache || cache.key !== key || Date.now() - cache.at > CACHE_MS) {
    cache = { key, at: Date.now(), health: probe() };
  }
  return cache.health;
}

export function resetAiHealthCache(): void {
  cache = undefined;
}
