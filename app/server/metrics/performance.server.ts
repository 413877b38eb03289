import {
  contractStatus,
  getInstanceByUser,
  type InstanceRow,
  liveSample,
} from "../agents/instances.server.ts";
import {
  messageFiguresOf,
  type TurnFigureRow,
  turnFigureColumns,
  turnsQuery,
} from "../agents/message-figures.server.ts";
import { type UsageFigureRow, usageFigureColumns, usageFiguresOf } from "../ai/usage.server.ts";
import { db } from "../platform/db.server.ts";
import { aiView, messagesView, percent } from "./shared.server.ts";

// GET /api/metrics/:userId/performance: how the user's instance and agents are doing now. The
// instance's figures are the worker's latest sample, given only while it is fresh (as agent
// stats judge it); message and AI figures cover the last 24 hours, with last-hour counts.

const WINDOW_MS = 24 * 3_600_000;

function instanceView(row: InstanceRow, now: number) {
  const live = liveSample(row, now);
  const used = row.memory_bytes ?? 0;
  const limit = row.memory_limit_bytes;
  const running = row.observed_state === "running" && row.started_at !== null;
  return {
    status: contractStatus(row),
    health: row.health,
    plan: row.plan,
    gatewayVersion: row.gateway_version ?? "unknown",
    startedAt: row.started_at?.toISOString() ?? null,
    uptimeMs: running ? Math.max(0, now - row.started_at!.getTime()) : null,
    /** Whether the figures below are a fresh sample; stale or absent ones are null. */
    live,
    sampledAt: row.sampled_at?.toISOString() ?? null,
    cpuPercent: live ? percent(row.cpu_percent ?? 0) : null,
    memoryBytes: live ? used : null,
    memoryLimitBytes: limit,
    memoryPercent: live && limit ? percent((100 * used) / limit) : null,
    pids: live ? (row.pids ?? 0) : null,
    networkRxBytes: live ? row.network_rx_bytes : null,
    networkTxBytes: live ? row.network_tx_bytes : null,
    storageBytes: row.storage_bytes,
    oomKills: row.oom_kills,
  };
}

type ByAgent<R> = R & { agent_id: string | null };

export async function userPerformance(userId: string, now = Date.now()) {
  const since = new Date(now - WINDOW_MS);
  const sql = db();
  const [instance, agents, messageRows, [usage]] = await Promise.all([
    getInstanceByUser(userId),
    sql<{ id: string; name: string; model: string }[]>`
      select id, name, model from agents where user_id = ${userId} order by created_at, id`,
    // One row per agent with turns, plus the user's total (the empty grouping set).
    sql<ByAgent<TurnFigureRow>[]>`
      select agent_id, ${turnFigureColumns()}
      from (${turnsQuery({ userId, since })}) turns
      group by grouping sets ((agent_id), ())`,
    sql<UsageFigureRow[]>`
      select ${usageFigureColumns()} from ai_usage
      where user_id = ${userId} and created_at >= ${since}`,
  ]);
  const perAgent = new Map(messageRows.map((r) => [r.agent_id ?? "total", r]));
  const messages = (row: TurnFigureRow | undefined) => {
    const figures = messageFiguresOf(row);
    return { ...messagesView(figures), lastHour: figures.lastHour };
  };
  const ai = usageFiguresOf(usage);
  return {
    performance: {
      userId,
      window: "24h",
      generatedAt: new Date(now).toISOString(),
      instance: instance ? instanceView(instance, now) : null,
      messages: messages(perAgent.get("total")),
      ai: { ...aiView(ai), lastHour: ai.lastHour },
      agents: agents.map((a) => ({
        id: a.id,
        name: a.name,
        model: a.model,
        messages: messages(perAgent.get(a.id)),
      })),
    },
    status: "ok",
  };
}
