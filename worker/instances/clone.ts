import { getOwnedAgent } from "../../app/server/agents/agents.server.ts";
import {
  getInstance,
  getInstanceByUser,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import type { GatewayClient } from "../../app/server/openclaw/client.server.ts";
import { applyAgents } from "./agents-sync.ts";
import { GATEWAY_PORT, rt, STATE_DIR } from "./engine.ts";
import { waitHealthy } from "./health.ts";
import { withInstanceLock } from "./lock.ts";
import { connectPaired } from "./pairing.ts";

// clone-agent: the clone's entry goes into the gateway (a sync), then the source agent's
// workspace (MEMORY.md and memory/, its bootstrap files, workspace skills) is copied into the
// clone's, files as they are at that moment (decision 0162). A user's agents share one gateway
// and one volume, so the copy is a `cp -a` inside the running gateway, where the gateway itself
// says which folder is whose (agents.files.list names the workspace); no path is guessed.

/** A workspace folder the gateway names; it must lie in the state volume. */
async function workspaceOf(client: GatewayClient, gatewayAgentId: string): Promise<string> {
  const listed = await client.request<{ workspace?: string }>("agents.files.list", {
    agentId: gatewayAgentId,
  });
  const dir = listed.workspace ?? "";
  if (!dir.startsWith(`${STATE_DIR}/`) || dir.includes("..") || /['\\\n]/.test(dir)) {
    throw new Error(`the gateway names an unexpected workspace for ${gatewayAgentId}: ${dir}`);
  }
  return dir;
}

async function cloneLocked(row: InstanceRow, sourceId: string, cloneId: string) {
  const source = await getOwnedAgent(row.user_id, sourceId);
  const clone = await getOwnedAgent(row.user_id, cloneId);
  const info = await rt().inspect(row.container_name);
  if (!info?.running) throw new Error("the agent's gateway is not running");
  await waitHealthy(info);
  const { client, row: paired } = await connectPaired(row, `${info.address}:${GATEWAY_PORT}`);
  try {
    await applyAgents(client, paired);
    const from = await workspaceOf(client, source.gateway_agent_id);
    const to = await workspaceOf(client, clone.gateway_agent_id);
    if (from === to) throw new Error("the clone shares the source's workspace");
    const copied = await rt().exec(
      row.container_name,
      ["sh", "-c", `mkdir -p '${to}' && if [ -d '${from}' ]; then cp -a '${from}/.' '${to}/'; fi`],
      { timeoutMs: 300_000 },
    );
    if (copied.exitCode !== 0) {
      throw new Error(`copying the workspace failed: ${copied.stderr.slice(0, 500)}`);
    }
  } finally {
    client.close();
  }
}

/** The clone-agent job; its output ({ok, error}) is what the waiting request answers. */
export async function cloneAgentState(
  userId: string,
  sourceId: string,
  cloneId: string,
): Promise<{ ok: boolean; error?: string }> {
  const row = await getInstanceByUser(userId);
  if (!row?.container_id) return { ok: false, error: "the agent has no running gateway" };
  try {
    await withInstanceLock(row.id, async () =>
      cloneLocked((await getInstance(row.id)) as InstanceRow, sourceId, cloneId),
    );
    return { ok: true };
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
}
