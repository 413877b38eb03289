import type { InstanceRow } from "../../app/server/agents/instances.server.ts";
import type { GatewayClient } from "../../app/server/openclaw/client.server.ts";
import { GatewayUnavailableError } from "../../app/server/openclaw/errors.server.ts";
import { gatewayAddress, rt } from "./engine.ts";
import { forgetSession } from "./forget-session.ts";
import { connectPaired } from "./pairing.ts";

// The reset-memory action: every session forgotten and every agent's long-term memory emptied;
// the agents, their configuration and the workspace files other than memory stay.

/** Forgets every session of the gateway; returns how many. */
async function forgetAllSessions(client: GatewayClient, containerId: string): Promise<number> {
  const list = await client.request<{ sessions?: Array<{ key?: string }> }>("sessions.list", {});
  let cleared = 0;
  for (const s of list.sessions ?? []) {
    if (!s.key) continue;
    await forgetSession(client, containerId, s.key);
    cleared++;
  }
  return cleared;
}

/** Empties every agent's MEMORY.md; returns the agents' ids (none listed: `main`). */
async function emptyMemoryFiles(client: GatewayClient): Promise<string[]> {
  const agents = await client.request<{ agents?: Array<{ id?: string }> }>("agents.list", {});
  const ids = (agents.agents ?? []).flatMap((a) => (a.id ? [a.id] : []));
  for (const agentId of ids.length ? ids : ["main"]) {
    await client.request("agents.files.set", { agentId, name: "MEMORY.md", content: "" });
  }
  return ids;
}

/** Removes the agents' daily notes (memory/ of every workspace). */
async function removeMemoryNotes(containerId: string): Promise<void> {
  const notes = await rt().exec(
    containerId,
    // The runtime's own state folder (the process driver's is not STATE_DIR); refused when
    // unset rather than resolving to /workspace.
    [
      "sh",
      "-c",
      'd="$OPENCLAW_STATE_DIR"; test -n "$d" && rm -rf -- "$d"/workspace/memory "$d"/workspace-*/memory',
    ],
    { timeoutMs: 30_000 },
  );
  if (notes.exitCode !== 0) {
    throw new Error(`removing the agents' memory notes failed: ${notes.stderr.slice(0, 300)}`);
  }
}

export async function resetMemory(row: InstanceRow): Promise<{ ok: true; message: string }> {
  const info = await rt().inspect(row.container_name);
  const address = gatewayAddress(info);
  if (!info?.running || !address) throw new GatewayUnavailableError("the gateway is not running");
  const { client } = await connectPaired(row, address);
  try {
    const cleared = await forgetAllSessions(client, info.id);
    const ids = await emptyMemoryFiles(client);
    await removeMemoryNotes(info.id);
    return {
      ok: true,
      message: `Memory reset: ${cleared} session(s) cleared, memory of ${Math.max(ids.length, 1)} agent(s) emptied`,
    };
  } finally {
    client.close();
  }
}
