import { type UsageFigureRow, usageFigureColumns, usageFiguresOf } from "../ai/usage.server.ts";
import { db } from "../platform/db.server.ts";
import { platformVersion } from "../platform/version.server.ts";
import { MIN_POPULATION, percent } from "./shared.server.ts";

// GET /api/metrics: the platform's own figures, public. Counts of accounts, agents and
// instances, and the last 24 hours' activity as aggregates only — withheld while fewer than
// MIN_POPULATION users were active, since the platform's totals would then be one user's.
// Computed at most once per CACHE_MS per process (concurrent callers share one computation).

export const PLATFORM_METRICS_CACHE_MS = 10_000;

export interface PlatformMetrics {
  generatedAt: string;
  version: string;
  users: number;
  agents: number;
  instances: { total: number; running: number };
  last24h: {
    activeUsers: number;
    /** Why the activity figures below are null, when they are. */
    withheld: string | null;
    messages: number | null;
    aiCalls: number | null;
    aiTokens: number | null;
    aiErrorRate: number | null;
    aiLatencyMs: { p50: number | null; p95: number | null } | null;
  };
}

async function computePlatformMetrics(): Promise<PlatformMetrics> {
  const sql = db();
  const [[counts], [active], [ai]] = await Promise.all([
    sql<{ users: number; agents: number; instances: number; running: number }[]>`
      select (select count(*) from users)::int as users,
        (select count(*) from agents)::int as agents,
        (select count(*) from instances)::int as instances,
        (select count(*) from instances where observed_state = 'running')::int as running`,
    sql<{ messages: number; active_users: number }[]>`
      with m as (select user_id from agent_messages where created_at > now() - interval '24 hours')
      select (select count(*) from m)::int as messages,
        (select count(*) from (
          select user_id from m
          union
          select user_id from ai_usage
          where created_at > now() - interval '24 hours' and user_id is not null) u
        )::int as active_users`,
    sql<UsageFigureRow[]>`
      select ${usageFigureColumns()} from ai_usage where created_at > now() - interval '24 hours'`,
  ]);
  const activeUsers = active?.active_users ?? 0;
  const shown = activeUsers >= MIN_POPULATION;
  const usage = usageFiguresOf(ai);
  return {
    generatedAt: new Date().toISOString(),
    version: platformVersion,
    users: counts?.users ?? 0,
    agents: counts?.agents ?? 0,
    instances: { total: counts?.instances ?? 0, running: counts?.running ?? 0 },
    last24h: {
      activeUsers,
      withheld: shown
        ? null
        : `Fewer than ${MIN_POPULATION} active users in the last 24 hours: activity figures are withheld`,
      messages: shown ? (active?.messages ?? 0) : null,
      aiCalls: shown ? usage.calls : null,
      aiTokens: shown ? usage.promptTokens + usage.completionTokens : null,
      aiErrorRate: shown ? percent(usage.errorRate) : null,
      aiLatencyMs: shown ? usage.latencyMs : null,
    },
  };
}

let cached: { at: number; value: Promise<PlatformMetrics> } | undefined;

/** The platform's figures, at most PLATFORM_METRICS_CACHE_MS old. */
export function platformMetrics(now = Date.now()): Promise<PlatformMetrics> {
  if (!cached || now - cached.at >= PLATFORM_METRICS_CACHE_MS) {
    const value = computePlatformMetrics();
    const entry = { at: now, value };
    cached = entry;
    // A failure is not remembered: the next caller tries again.
    value.catch(() => {
      if (cached === entry) cached = undefined;
    });
  }
  return cached.value;
}

export function resetPlatformMetricsCache(): void {
  cached = undefined;
}

/** GET /api/metrics's body (uptime is this web process's, read at answer time). */
export async function readPlatformMetrics() {
  return {
    metrics: { ...(await platformMetrics()), uptimeSeconds: Math.floor(process.uptime()) },
    status: "ok",
  };
}
