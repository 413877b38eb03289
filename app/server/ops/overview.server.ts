import { poolFigures } from "../agents/instances.server.ts";
import { coolingUntil } from "../ai/cooldown.server.ts";
import { aiHealth } from "../ai/health.server.ts";
import { configuredProviders } from "../ai/providers.server.ts";
import { providerSpendToday } from "../ai/usage.server.ts";
import { platformMetrics } from "../metrics/platform.server.ts";

// The console's front page: platform figures, the warm pool and the AI providers.

export async function opsOverview() {
  const [metrics, pool, health, spend] = await Promise.all([
    platformMetrics(),
    poolFigures(),
    aiHealth(),
    providerSpendToday(),
  ]);
  const now = Date.now();
  const providers = configuredProviders().map((config) => {
    const until = coolingUntil(config.name);
    const today = spend.find((s) => s.provider === config.name);
    return {
      name: config.name,
      healthy: health.providers[config.name] ?? false,
      // Cool-downs live in each web process; this is the one answering.
      coolingUntil: until > now ? new Date(until).toISOString() : null,
      callsToday: today?.calls ?? 0,
      spendTodayMicroUsd: today?.costMicroUsd ?? 0,
    };
  });
  return { metrics, pool, providers, aiStatus: health.status };
}
