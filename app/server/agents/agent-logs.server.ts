import { createHash } from "node:crypto";
import { z } from "zod";
import { LOG_LEVELS } from "../../schemas/agents.ts";
import { limitParam } from "../platform/paging.server.ts";
import { getOwnedAgent } from "./agents.server.ts";
import { withGateway } from "./instance-gateway.server.ts";
import { getInstanceByUser } from "./instances.server.ts";
import { sleepRecord } from "./sleep.server.ts";

// GET /api/agents/:id/logs: the gateway's log lines, parsed into the contract's entries.

export type LogLevel = (typeof LOG_LEVELS)[number];

export const logsQuery = z.object({
  limit: limitParam(100, 50),
  level: z.enum(LOG_LEVELS, { error: `level must be one of ${LOG_LEVELS.join(", ")}` }).optional(),
});

export interface AgentLogEntry {
  id: string;
  timestamp: string;
  level: LogLevel;
  message: string;
  source: string;
  agentId: string;
}

function levelOf(raw: string | undefined): LogLevel {
  switch (raw?.toLowerCase()) {
    case "warn":
    case "warning":
      return "warning";
    case "error":
    case "fatal":
      return "error";
    case "debug":
    case "trace":
    case "silly":
      return "debug";
    default:
      return "info";
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

function subsystemOf(raw: unknown): string | undefined {
  if (typeof raw !== "string" || !raw.trimStart().startsWith("{")) return undefined;
  try {
    const parsed = JSON.parse(raw) as Record<string, unknown>;
    const name = parsed.subsystem ?? parsed.module ?? parsed.plugin;
    return typeof name === "string" ? name : undefined;
  } catch {
    return undefined;
  }
}

/**
 * One line of the gateway's JSONL file log (tslog records as OpenClaw's parseLogLine reads
 * them: `_meta.logLevelName`, `_meta.name` holding `{"subsystem":…}`, numbered argument keys,
 * top-level `message`, `time`, `agent_id`). Undefined for lines that are not records.
 */
export function parseGatewayLogLine(
  raw: string,
): (Omit<AgentLogEntry, "agentId"> & { gatewayAgentId?: string }) | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (!isRecord(parsed)) return undefined;
  const meta = isRecord(parsed._meta) ? parsed._meta : undefined;
  const numbered = Object.keys(parsed)
    .filter((k) => /^\d+$/.test(k))
    .sort((a, b) => Number(a) - Number(b));
  const source =
    subsystemOf(meta?.name) ??
    subsystemOf(parsed["0"]) ??
    (typeof parsed.subsystem === "string" ? parsed.subsystem : undefined) ??
    "gateway";
  let message = typeof parsed.message === "string" ? parsed.message : undefined;
  if (message === undefined) {
    const parts = numbered
      .filter((k) => !(k === "0" && subsystemOf(parsed["0"])))
      .map((k) => (parsed as Record<string, unknown>)[k])
      .map((v) => (typeof v === "string" ? v : JSON.stringify(v)));
    message = parts.join(" ");
  }
  const time =
    typeof parsed.time === "string"
      ? parsed.time
      : typeof meta?.date === "string"
        ? meta.date
        : undefined;
  const timestamp = time && !Number.isNaN(Date.parse(time)) ? new Date(time).toISOString() : "";
  return {
    id: `log_${createHash("sha256").update(raw).digest("hex").slice(0, 20)}`,
    timestamp,
    level: levelOf(
      typeof meta?.logLevelName === "string" ? meta.logLevelName : (parsed.level as string),
    ),
    message,
    source,
    gatewayAgentId: typeof parsed.agent_id === "string" ? parsed.agent_id : undefined,
  };
}

/** The gateway's log tail; a sleeping agent's is the one kept as it went to sleep (0164). */
async function logTail(userId: string): Promise<{ lines?: string[] }> {
  const instance = await getInstanceByUser(userId);
  if (instance?.observed_state === "sleeping") {
    const kept = await sleepRecord(instance.id);
    if (kept) return { lines: kept.log_lines };
  }
  return withGateway(userId, (client) =>
    client.request<{ lines?: string[] }>("logs.tail", { limit: 2000, maxBytes: 500_000 }),
  );
}

/**
 * The gateway's recent log records that concern this agent (records of this agent and
 * gateway-wide ones; other agents' are left out), newest first.
 */
export async function agentLogs(
  userId: string,
  agentId: string,
  query: { limit: number; level?: LogLevel | undefined },
) {
  const agent = await getOwnedAgent(userId, agentId);
  const tail = await logTail(userId);
  const entries: AgentLogEntry[] = [];
  for (const line of tail.lines ?? []) {
    const parsed = parseGatewayLogLine(line);
    if (!parsed) continue;
    const { gatewayAgentId, ...entry } = parsed;
    if (gatewayAgentId && gatewayAgentId !== agent.gateway_agent_id) continue;
    if (query.level && entry.level !== query.level) continue;
    entries.push({ ...entry, agentId: agent.id });
  }
  entries.reverse();
  return {
    logs: entries.slice(0, query.limit),
    total: entries.length,
    limit: query.limit,
    status: "ok",
  };
}
