import { getInstance } from "../../app/server/agents/instances.server.ts";
import { isClusterRuntime } from "../runtime/index.ts";
import { rt } from "./engine.ts";

// The node a gateway boots on, for the per-node slots its wake or restart takes (decisions 0221
// amended, 0240): on a Swarm the node its service is pinned to (its state volume is there); on
// one engine host, "host".

/** A node's name for the slots; "host" for a single engine, or when the node is unknown. */
export async function gatewayNodeOf(instanceId: string): Promise<string> {
  const runtime = rt();
  if (!isClusterRuntime(runtime)) return "host";
  const row = await getInstance(instanceId);
  if (!row) return "host";
  const node = await runtime.nodeOf(row.container_id ?? row.container_name).catch(() => undefined);
  return node ?? "host";
}
