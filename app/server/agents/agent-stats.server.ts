import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { versionedRead } from "../platform/read-cache.server.ts";
import {
  agentStatus,
  formatBytes,
  getInstanceSampleByUser,
  liveSample,
} from "./instances.server.ts";
import {
  messageFiguresOf,
  type TurnFigureRow,
  turnFigureColumns,
  turnFiguresChangeAt,
  turnsQuery,
} from "./message-figures.server.ts";

// GET /api/agents/:id/stats: the instance's latest sample (while fresh) and the agent's turns.

const pct = (n: number) => `${(Math.round(n * 100) / 100).toFixed(2)}%`;

export function formatDuration(ms: number): string {
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const parts = [d ? `${d}d` : "", d || h ? `${h}h` : "", d || h || m ? `${m}m` : "", `${s % 60}s`];
  return parts.filter(Boolean).join(" ");
}

const na = (v: string | null) => v ?? "N/A";

/**
 * The owned agent's turn figures (a window over all its messages), kept while no message of the
 * owner changes and until a figure would move with time (read-cache). Throws 404 when the agent
 * is not the user's.
 */
function readFigures(userId: string, agentId: string) {
  return versionedRead(
    userId,
    `figures:${agentId}`,
    async () => {
      const [row] = await db()<(TurnFigureRow & { change_at: number | null })[]>`
        select f.*
        from agents a
        cross join lateral (
          select ${turnFigureColumns()}, ${turnFiguresChangeAt()}
          from (${turnsQuery({ agentId })}) turns) f
        where a.id = ${agentId} and a.user_id = ${userId}`;
      if (!row) throw new DomainError(404, "Agent not found");
      return { figures: messageFiguresOf(row), changeAt: row.change_at };
    },
    (kept) => kept.changeAt ?? Number.POSITIVE_INFINITY,
  );
}

/**
 * The turn figures and the owner's instance (its live sample moves every few seconds: read each
 * time, beside the figures' version check).
 */
async function readStats(userId: string, agentId: string) {
  const [{ figures }, instance] = await Promise.all([
    readFigures(userId, agentId),
    getInstanceSampleByUser(userId),
  ]);
  return { agent: { id: agentId }, instance, figures };
}

export async function agentStats(userId: string, agentId: string) {
  const { agent, instance, figures } = await readStats(userId, agentId);
  const now = Date.now();
  const asleepSince = instance?.observed_state === "sleeping" ? instance.sampled_at : null;
  const uptime = instance?.started_at
    ? Math.max(0, (asleepSince?.getTime() ?? now) - instance.started_at.getTime())
    : 0;
  // A sleeping agent answers from the sample taken as it went to sleep (decision 0164).
  const asleep = instance?.observed_state === "sleeping" && instance.sampled_at !== null;
  if (instance && (liveSample(instance, now) || asleep)) {
    const used = instance.memory_bytes ?? 0;
    const limit = instance.memory_limit_bytes ?? 0;
    return {
      stats: {
        agentId: agent.id,
        cpu: pct(instance.cpu_percent ?? 0),
        memory: `${formatBytes(used)} / ${formatBytes(limit)}`,
        memoryPercent: limit > 0 ? pct((100 * used) / limit) : "N/A",
        network:
          instance.network_rx_bytes == null
            ? "N/A"
            : `${formatBytes(instance.network_rx_bytes)} / ${formatBytes(instance.network_tx_bytes ?? 0)}`,
        uptime,
        uptimeFormatted: formatDuration(uptime),
        status: agentStatus(instance),
        pids: String(instance.pids ?? 0),
        messagesProcessed: String(figures.processed),
        messagesPerHour: String(figures.lastHour),
        averageResponseTime: na(
          figures.averageResponseMs == null ? null : String(figures.averageResponseMs),
        ),
        successRate: na(figures.successRate == null ? null : pct(figures.successRate)),
        errorRate: na(figures.successRate == null ? null : pct(100 - figures.successRate)),
        stale: asleep,
        ...(asleep ? { sampledAt: instance.sampled_at?.toISOString() ?? null } : {}),
      },
      status: "ok",
    };
  }
  // Not reachable: the contract's mock variant, carrying what is known (recorded messages) and
  // zeros otherwise; never invented figures.
  return {
    stats: {
      agentId: agent.id,
      messagesProcessed: figures.processed,
      messagesPerHour: figures.lastHour,
      averageResponseTime: figures.averageResponseMs ?? 0,
      uptime: 0,
      successRate: pct(figures.successRate ?? 0),
      errorRate: pct(figures.successRate == null ? 0 : 100 - figures.successRate),
      timestamp: new Date(now).toISOString(),
      // Beyond the contract: no live figures (engine down, instance not running, sample old).
      stale: true,
      sampledAt: instance?.sampled_at?.toISOString() ?? null,
    },
    status: "mock",
  };
}
