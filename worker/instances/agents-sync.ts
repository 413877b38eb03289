import { gatewayPartOf } from "../../app/server/agents/agent-config.server.ts";
import { type AgentRow, listAgents } from "../../app/server/agents/agents.server.ts";
import {
  getInstance,
  getInstanceByUser,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import type { GatewayClient } from "../../app/server/openclaw/client.server.ts";
import { GatewayRequestError } from "../../app/server/openclaw/errors.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { sendJob } from "../../app/server/platform/jobs.server.ts";
import { agentsPatch, type GatewayConfigSnapshot, REPLACE_PATHS } from "./agents-patch.ts";
import { gatewayAddress, log, rt } from "./engine.ts";
import { waitHealthy } from "./health.ts";
import { withInstanceLock } from "./lock.ts";
import { connectPaired } from "./pairing.ts";

// sync-agents: writes ALL of a user's agents into their gateway's config
// (agents.entries.<gateway_agent_id>) with config.get + config.patch over the paired
// connection. The platform's rows are the truth: the patch is computed from them alone
// (agents-patch.ts), so running it again changes nothing, and it is re-run whenever an
// instance (re)starts.

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
  // The driver's endpoint: the process driver publishes each gateway on its own loopback port.
  const { client, row: paired } = await connectPaired(row, gatewayAddress(info) as string);
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
