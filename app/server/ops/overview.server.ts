import { poolFigures } from "../agents/instances.server.ts";
import { coolingUntil } from "../ai/cooldown.server.ts";
import { aiHealth } from "../ai/health.server.ts";
import { configuredProviders } from "../ai/providers.server.ts";
import { providerSpendToday } from "../ai/usage.server.ts";
import { platformMetrics } from "../metrics/platform.server.ts";
import { jobCounts } from "../platform/jobs.server.ts";
import { backupFigures, engineFigures, instanceFigures, ledgerFigures } from "./figures.server.ts";

// The console's front page: platform figures, the warm pool and the AI providers.

export async function opsOverview() {
  // The operations figures are the ones Prometheus scrapes (figures.server.ts, jobCounts): one
  // way of counting for the console and the alerts.
  const [metrics, pool, health, spend, instances, ledger, backups, engine, jobs] =
    await Promise.all([
      platformMetrics(),
      poolFigures(),
      aiHealth(),
      providerSpendToday(),
      instanceFigures(),
      ledgerFigures(),
      backupFigures(),
      engineFigures(),
      jobCounts(),
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
  const byState: Record<string, number> = {};
  for (const row of instances) byState[row.state] = (byState[row.state] ?? 0) + row.count;
  const operations = {
    instancesByState: byState,
    jobsWaiting: jobs.reduce((n, q) => n + q.created + q.retry, 0),
    oldestJobWaitSeconds: Math.max(0, ...jobs.map((q) => q.oldestPendingSeconds)),
    jobsFailed: jobs.reduce((n, q) => n + q.failed, 0),
    ledger: { ...ledger, driftMicroUsd: ledger.ledgerMicroUsd - ledger.balancesMicroUsd },
    backups,
    engineUp: engine.engineUp,
    engineLiveRestore: engine.engineLiveRestore,
    volumeRemovalsDeferred: engine.volumeRemovalsDeferred,
  };
  return { metrics, pool, providers, aiStatus: health.status, operations };
}
