import { z } from "zod";
import { CONFIG_MAX_BYTES, CUSTOM_MODEL } from "../../schemas/agents.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import { logger } from "../platform/logger.server.ts";
import { type AgentRow, getOwnedAgent } from "./agents.server.ts";
import { awaitJob, getInstanceByUser } from "./instances.server.ts";

// An agent's stored configuration: any JSON object the user sends (size-capped), kept verbatim
// as the truth. Only an allow-listed subset of keys ever reaches the gateway's
// agents.entries.<id>: nothing a user writes may touch gateway auth, bind, tools.elevated,
// sandbox, runtimes or workspace paths. docs/decisions/0061-agent-config-allowlist.md

/** Keys of agents.entries.<id> a user's configuration may set (OpenClaw 2026.9.6). */
export const GATEWAY_CONFIG_KEYS = [
  "identity",
  "thinkingDefault",
  "reasoningDefault",
  "fastModeDefault",
  "params",
  "skills",
  "groupChat",
] as const;

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

export const agentConfigSchema = z
  .unknown()
  // abort: zod runs every refinement by default, and the size check needs an object.
  .refine(isPlainObject, { message: "must be a JSON object", abort: true })
  .refine(
    (v) => Buffer.byteLength(JSON.stringify(v) ?? "", "utf8") <= CONFIG_MAX_BYTES,
    `must be at most ${CONFIG_MAX_BYTES} bytes as JSON`,
  )
  .transform((v) => v as Record<string, unknown>);

/** The part of a stored configuration that is written into the gateway. */
export function gatewayPartOf(config: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of GATEWAY_CONFIG_KEYS) {
    if (config[key] !== undefined && config[key] !== null) out[key] = config[key];
  }
  return out;
}

/** One agents.entries value: name, model on the platform provider, allow-listed keys. */
export function gatewayEntryOf(agent: {
  name: string;
  model: string;
  config: Record<string, unknown>;
}): Record<string, unknown> {
  const entry: Record<string, unknown> = { ...gatewayPartOf(agent.config), name: agent.name };
  // `custom` inherits agents.defaults.model (the instance's model) instead of pinning one.
  if (agent.model !== CUSTOM_MODEL) entry.model = `platform/${agent.model}`;
  return entry;
}

// --- GET/PUT /api/agents/:id/config ---------------------------------------------------------

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
  /** The settings form's name and model, in the same revision. */
  profile?: { name: string; model: string },
) {
  const current = await getOwnedAgent(userId, agentId);
  const [row] = await db()<AgentRow[]>`
    update agents set config = ${db().json(config as never)},
      name = ${profile?.name ?? current.name}, model = ${profile?.model ?? current.model},
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
