import { CUSTOM_MODEL } from "../app/schemas/agents.ts";
import {
  GATEWAY_CONFIG_KEYS,
  gatewayEntryOf,
  gatewayPartOf,
} from "../app/server/agents/agent-config.server.ts";
import {
  type AgentRow,
  FIRST_GATEWAY_AGENT_ID,
  listAgents,
} from "../app/server/agents/agents.server.ts";
import {
  getInstance,
  getInstanceByUser,
  type InstanceRow,
} from "../app/server/agents/instances.server.ts";
import type { GatewayClient } from "../app/server/openclaw/client.server.ts";
import { GatewayRequestError } from "../app/server/openclaw/errors.server.ts";
import { db } from "../app/server/platform/db.server.ts";
import { env } from "../app/server/platform/env.server.ts";
import { sendJob } from "../app/server/platform/jobs.server.ts";
import {
  connectPaired,
  GATEWAY_PORT,
  log,
  rt,
  waitHealthy,
  withInstanceLock,
} from "./instances.ts";

// sync-agents: writes ALL of a user's agents into their gateway's config
// (agents.entries.<gateway_agent_id>) with config.get + config.patch over the paired
// connection. The platform's rows are the truth: the patch is computed from them alone, so
// running it again changes nothing, and it is re-run whenever an instance (re)starts.

interface GatewayConfigSnapshot {
  hash: string;
  config?: {
    agents?: { entries?: Record<string, unknown>; ownership?: string };
    models?: { providers?: { platform?: { models?: Array<{ id: string }> } } };
  };
}

/** Gateway agent ids the platform created (`main`, `agt-…`); others are left alone. */
const isPlatformAgentId = (id: string) => id === FIRST_GATEWAY_AGENT_ID || id.startsWith("agt-");

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The merge patch (RFC 7386, what config.patch applies) turning `current` into `desired`:
 * keys that are gone become null, nested objects are diffed, anything else is replaced.
 */
export function mergeDiff(current: unknown, desired: unknown): unknown {
  if (!isObject(current) || !isObject(desired)) return desired;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(desired)) out[k] = mergeDiff(current[k], v);
  for (const k of Object.keys(current)) if (!(k in desired)) out[k] = null;
  return out;
}

/** Keys of an entry the platform owns (the gateway adds its own, e.g. workspace). */
const OWNED_KEYS = new Set<string>(["name", "model", ...GATEWAY_CONFIG_KEYS]);

/** Arrays the patch replaces (config.patch refuses destructive array changes elsewhere). */
export const REPLACE_PATHS = [
  "models.providers.platform.models",
  "agents.entries.*.skills",
  "agents.entries.*.groupChat.mentionPatterns",
];

/** The config.patch that makes the gateway's agents exactly the user's agents. */
export function agentsPatch(
  agents: AgentRow[],
  instance: Pick<InstanceRow, "model">,
  current: GatewayConfigSnapshot["config"],
) {
  const entries: Record<string, unknown> = {};
  for (const agent of agents) {
    const existing = current?.agents?.entries?.[agent.gateway_agent_id];
    const owned = Object.fromEntries(
      Object.entries(isObject(existing) ? existing : {}).filter(([k]) => OWNED_KEYS.has(k)),
    );
    // A key removed from the stored configuration is removed from the gateway too.
    entries[agent.gateway_agent_id] = mergeDiff(owned, gatewayEntryOf(agent));
  }
  // A deleted agent's entry goes (merge-patch null); entries not made by us are kept.
  for (const id of Object.keys(current?.agents?.entries ?? {})) {
    if (!(id in entries) && isPlatformAgentId(id) && id !== FIRST_GATEWAY_AGENT_ID) {
      entries[id] = null;
    }
  }
  // Every agent's model must be one the platform provider declares.
  const declared = new Set((current?.models?.providers?.platform?.models ?? []).map((m) => m.id));
  const wanted = [
    instance.model ?? env().RUNTIME_DEFAULT_MODEL,
    ...agents.map((a) => a.model).filter((m) => m !== CUSTOM_MODEL),
  ];
  const models = [...new Set([...declared, ...wanted])].map((id) => ({ id, name: id }));
  return {
    agents: {
      entries,
      // Several agents in one gateway are an explicit fleet: no implicit default owner.
      ...(agents.length > 1 ? { ownership: "explicit" as const } : {}),
    },
    models: { providers: { platform: { models } } },
  };
}

async function recordApplied(agents: AgentRow[], error?: string) {
  for (const agent of agents) {
    if (error) {
      await db()`update agents set apply_error = ${error.slice(0, 2000)} where id = ${agent.id}`;
    } else {
      // The revision read before the patch: a PUT that landed meanwhile stays unapplied and
      // has its own job queued.
      await db()`
        update agents set applied_revision = greatest(applied_revision, ${agent.config_revision}),
          applied_at = now(), apply_error = null
        where id = ${agent.id}`;
    }
  }
}

async function patchAgents(
  client: GatewayClient,
  agents: AgentRow[],
  row: InstanceRow,
  withConfig: (agent: AgentRow) => boolean,
) {
  const current = await client.request<GatewayConfigSnapshot>("config.get");
  const rows = agents.map((a) => (withConfig(a) ? a : { ...a, config: {} }));
  await client.request(
    "config.patch",
    {
      baseHash: current.hash,
      raw: JSON.stringify(agentsPatch(rows, row, current.config)),
      replacePaths: REPLACE_PATHS,
    },
    { timeoutMs: 30_000 },
  );
}

/**
 * Patches the user's agents into a connected gateway; records the outcome on the rows. When
 * the gateway refuses the patch (an invalid value in some agent's configuration), the agents
 * are applied without their own keys and then each agent's keys one at a time, so one bad
 * configuration holds back only its own agent (its apply_error says why).
 */
export async function applyAgents(client: GatewayClient, row: InstanceRow) {
  const agents = await listAgents(row.user_id);
  if (agents.length === 0) return { agents: 0 };
  try {
    await patchAgents(client, agents, row, () => true);
    await recordApplied(agents);
    return { agents: agents.length };
  } catch (error) {
    if (!(error instanceof GatewayRequestError)) {
      await recordApplied(agents, (error as Error).message);
      throw error;
    }
  }
  try {
    await patchAgents(client, agents, row, () => false);
  } catch (error) {
    await recordApplied(agents, (error as Error).message);
    throw error;
  }
  const accepted = new Set<string>();
  const refused: AgentRow[] = [];
  for (const agent of agents) {
    if (Object.keys(gatewayPartOf(agent.config)).length > 0) {
      try {
        await patchAgents(client, agents, row, (a) => a.id === agent.id || accepted.has(a.id));
      } catch (error) {
        if (!(error instanceof GatewayRequestError)) throw error;
        await recordApplied([agent], `the gateway refused this configuration: ${error.message}`);
        refused.push(agent);
        continue;
      }
    }
    accepted.add(agent.id);
  }
  await recordApplied(agents.filter((a) => accepted.has(a.id)));
  return { agents: agents.length, refused: refused.map((a) => a.id) };
}

/** Connects (paired) to a running instance and applies its agents; caller holds the lock. */
export async function syncAgentsOf(row: InstanceRow) {
  const info = await rt().inspect(row.container_name);
  if (!info?.running || !info.address) return { skipped: "the gateway is not running" };
  const { client, row: paired } = await connectPaired(row, `${info.address}:${GATEWAY_PORT}`);
  try {
    return await applyAgents(client, paired);
  } finally {
    client.close();
  }
}

/**
 * The sync-agents job. A user without agents or a provisioned instance is skipped; right after
 * a start the gateway may still be booting, so /healthz is awaited before (not under) the
 * instance lock, which lifecycle actions need.
 */
export async function syncAgents(userId: string) {
  const [agents] = await db()<{ n: number }[]>`
    select count(*)::int as n from agents where user_id = ${userId}`;
  if (!agents?.n) return { skipped: "no agents" };
  const found = await getInstanceByUser(userId);
  if (!found?.container_id) return { skipped: "no provisioned instance" };
  const info = await rt().inspect(found.container_name);
  if (!info?.running) return { skipped: "the gateway is not running" };
  await waitHealthy(info, SYNC_HEALTH_WAIT_MS);
  return withInstanceLock(found.id, async () => {
    const row = await getInstance(found.id);
    if (!row) return { skipped: "no such instance" };
    const result = await syncAgentsOf(row);
    log().info({ userId, ...result }, "agents synced");
    return result;
  });
}

/** How long a sync waits for a booting gateway (the job retries after that). */
const SYNC_HEALTH_WAIT_MS = 120_000;

/** Queues a sync for the instance's user (an instance came back: start, repair, reconcile). */
export async function queueAgentSync(instanceId: string): Promise<void> {
  const row = await getInstance(instanceId);
  if (!row) return;
  await sendJob("sync-agents", { userId: row.user_id }).catch((error) =>
    log().warn({ err: error, instanceId }, "sync-agents could not be enqueued"),
  );
}

/** Right after provisioning: the agents go in at once; a failure leaves a retrying job. */
export async function syncAfterProvision(instanceId: string): Promise<void> {
  const row = await getInstance(instanceId);
  if (!row) return;
  try {
    await syncAgents(row.user_id);
  } catch (error) {
    log().warn({ err: error, instanceId }, "agents sync after provisioning failed; queued");
    await queueAgentSync(instanceId);
  }
}
