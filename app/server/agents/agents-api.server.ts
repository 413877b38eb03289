import { createHash } from "node:crypto";
import { z } from "zod";
import {
  createVerificationChallenge,
  deleteAgentVerification,
  getAgentVerification,
  type Proof,
  verificationTypes,
  verifyAgent,
} from "../identity/verification.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import { logger } from "../platform/logger.server.ts";
import { agentConfigSchema } from "./agent-config.server.ts";
import { type AgentRow, agentStatus, agentSummaries, getOwnedAgent } from "./agents.server.ts";
import { withGateway } from "./gateway-connection.server.ts";
import { awaitJob, formatBytes, getInstanceByUser, type InstanceRow } from "./instances.server.ts";
import { listMessages, messageFigures } from "./messages.server.ts";

// The /api/agents routes' service functions (routes stay thin). Every function takes the
// caller's id first and reads the agent through getOwnedAgent: another user's agent is 404.

export const agentParams = z.object({
  id: z
    .string()
    .min(1)
    .max(64)
    .regex(/^[A-Za-z0-9_-]+$/, "must be an agent id"),
});

// --- list and detail ----------------------------------------------------------------------

export async function listAgentsView(userId: string) {
  const agents = await agentSummaries(userId);
  return { agents, count: agents.length, status: "ok" };
}

/** The contract's Agent detail: the instance's live facts plus the verification record. */
export async function agentDetail(userId: string, agentId: string) {
  const agent = await getOwnedAgent(userId, agentId);
  const [instance, verification] = await Promise.all([
    getInstanceByUser(userId),
    getAgentVerification(agent.id),
  ]);
  const subdomain = `${agent.id}.${env().AGENTS_DOMAIN}`;
  return {
    agent: {
      id: agent.id,
      name: agent.name,
      model: agent.model,
      status: agentStatus(instance),
      startedAt: instance?.started_at?.toISOString() ?? null,
      plan: instance?.plan ?? agent.tier,
      subdomain,
      url: `https://${subdomain}`,
      // As the running gateway reported it in hello-ok (recorded by the worker).
      gatewayVersion: instance?.gateway_version ?? "unknown",
      verified: verification.verified,
      verificationType: verification.verificationType,
      attestationUid: verification.attestationUid,
      verifiedAt: verification.verifiedAt,
    },
    status: "ok",
  };
}

// --- configuration ------------------------------------------------------------------------

export async function readAgentConfig(userId: string, agentId: string) {
  const agent = await getOwnedAgent(userId, agentId);
  return { config: agent.config, status: "ok" };
}

export const agentConfigBody = agentConfigSchema;

/**
 * Stores the configuration (a new revision: the truth even while the gateway is down) and
 * queues the worker's sync; when the instance is running, waits briefly for it to land.
 */
export async function updateAgentConfig(
  userId: string,
  agentId: string,
  config: Record<string, unknown>,
) {
  await getOwnedAgent(userId, agentId);
  const [row] = await db()<AgentRow[]>`
    update agents set config = ${db().json(config as never)},
      config_revision = config_revision + 1, updated_at = now()
    where id = ${agentId} and user_id = ${userId}
    returning *`;
  if (!row) throw new DomainError(404, "Agent not found");
  await recordAudit({
    action: "agent.configured",
    userId,
    target: agentId,
    details: { revision: row.config_revision },
  });
  const instance = await getInstanceByUser(userId);
  let applied = false;
  let applyError: string | undefined;
  if (instance?.container_id) {
    let jobId: string | undefined;
    try {
      jobId = await sendJob("sync-agents", { userId });
    } catch (error) {
      logger().warn({ err: error, agentId }, "sync-agents could not be enqueued");
    }
    if (jobId && instance.observed_state === "running") {
      await awaitJob("sync-agents", jobId, env().AGENT_CONFIG_APPLY_WAIT_MS);
      const [now] = await db()<{ applied_revision: number; apply_error: string | null }[]>`
        select applied_revision, apply_error from agents where id = ${agentId}`;
      applied = (now?.applied_revision ?? 0) >= row.config_revision;
      if (!applied && now?.apply_error) applyError = now.apply_error;
    }
  }
  // `applyError`: why the running gateway did not take it (the stored revision stays).
  return { config: row.config, status: "updated", applied, ...(applyError ? { applyError } : {}) };
}

// --- stats --------------------------------------------------------------------------------

const pct = (n: number) => `${(Math.round(n * 100) / 100).toFixed(2)}%`;

export function formatDuration(ms: number): string {
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const parts = [d ? `${d}d` : "", d || h ? `${h}h` : "", d || h || m ? `${m}m` : "", `${s % 60}s`];
  return parts.filter(Boolean).join(" ");
}

/** Is the row's sample fresh enough to call live (a few sampler periods)? */
export function liveSample(instance: InstanceRow | undefined, now = Date.now()): boolean {
  if (instance?.observed_state !== "running" || !instance.sampled_at) return false;
  const bound = Math.max(env().INSTANCE_SAMPLE_INTERVAL_MS * 4, 30_000);
  return now - instance.sampled_at.getTime() <= bound;
}

const na = (v: string | null) => v ?? "N/A";

export async function agentStats(userId: string, agentId: string) {
  const agent = await getOwnedAgent(userId, agentId);
  const [instance, figures] = await Promise.all([
    getInstanceByUser(userId),
    messageFigures({ agentId: agent.id }),
  ]);
  const now = Date.now();
  const uptime = instance?.started_at ? Math.max(0, now - instance.started_at.getTime()) : 0;
  if (instance && liveSample(instance, now)) {
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
    },
    status: "mock",
  };
}

// --- logs ---------------------------------------------------------------------------------

export const LOG_LEVELS = ["info", "warning", "error", "debug"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const limitQuery = (max: number, fallback: number) =>
  z.preprocess(
    (v) => (v === undefined || v === "" ? undefined : v),
    z.coerce
      .number({ error: "must be an integer" })
      .int("must be an integer")
      .transform((n) => Math.min(Math.max(n, 1), max))
      .default(fallback),
  );

export const logsQuery = z.object({
  limit: limitQuery(100, 50),
  level: z.enum(LOG_LEVELS, { error: `level must be one of ${LOG_LEVELS.join(", ")}` }).optional(),
});

export const messagesQuery = z.object({
  limit: limitQuery(100, 50),
  offset: z.preprocess(
    (v) => (v === undefined || v === "" ? undefined : v),
    z.coerce
      .number({ error: "must be an integer" })
      .int("must be an integer")
      .min(0, "must not be negative")
      .default(0),
  ),
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
  const tail = await withGateway(userId, (client) =>
    client.request<{ lines?: string[] }>("logs.tail", { limit: 2000, maxBytes: 500_000 }),
  );
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

// --- messages -----------------------------------------------------------------------------

export async function agentMessages(
  userId: string,
  agentId: string,
  query: { limit: number; offset: number },
) {
  const agent = await getOwnedAgent(userId, agentId);
  const page = await listMessages(agent.id, query);
  return { ...page, limit: query.limit, offset: query.offset, status: "ok" };
}

// --- verification -------------------------------------------------------------------------

export const verifyBody = z
  .object({
    verificationType: z.enum(verificationTypes, {
      error: `verificationType must be one of ${verificationTypes.join(", ")}`,
    }),
    attestationUid: z.string().min(1).max(200).optional(),
    signature: z.string().min(1).max(20_000).optional(),
    walletAddress: z.string().min(1).max(100).optional(),
  })
  .superRefine((b, ctx) => {
    if (b.verificationType === "eas" && !b.attestationUid) {
      ctx.addIssue({ code: "custom", path: ["attestationUid"], message: "required for eas" });
    }
    if (b.verificationType !== "eas" && !b.signature) {
      ctx.addIssue({
        code: "custom",
        path: ["signature"],
        message: `required for ${b.verificationType}`,
      });
    }
    if (b.verificationType === "ens" && !b.walletAddress) {
      ctx.addIssue({ code: "custom", path: ["walletAddress"], message: "required for ens" });
    }
  });

function proofOf(body: z.infer<typeof verifyBody>): Proof {
  switch (body.verificationType) {
    case "eas":
      return { verificationType: "eas", attestationUid: body.attestationUid as string };
    case "ens":
      return {
        verificationType: "ens",
        signature: body.signature as string,
        walletAddress: body.walletAddress as string,
      };
    default:
      return { verificationType: body.verificationType, signature: body.signature as string };
  }
}

export async function readAgentVerification(userId: string, agentId: string) {
  const agent = await getOwnedAgent(userId, agentId);
  const { metadata: _metadata, ...record } = await getAgentVerification(agent.id);
  return record;
}

export async function submitAgentVerification(
  userId: string,
  agentId: string,
  body: z.infer<typeof verifyBody>,
) {
  const agent = await getOwnedAgent(userId, agentId);
  const record = await verifyAgent({ agentId: agent.id, ownerId: userId }, proofOf(body));
  return {
    success: true,
    verified: record.verified,
    verificationType: record.verificationType,
    attestationUid: record.attestationUid,
    verifiedAt: record.verifiedAt,
  };
}

export async function removeAgentVerification(userId: string, agentId: string) {
  const agent = await getOwnedAgent(userId, agentId);
  await deleteAgentVerification(agent.id);
  return { success: true };
}

export async function agentVerificationChallenge(userId: string, agentId: string) {
  const agent = await getOwnedAgent(userId, agentId);
  const { challenge, expiresAt } = await createVerificationChallenge(agent.id);
  return { challenge, expiresAt: expiresAt.toISOString() };
}
