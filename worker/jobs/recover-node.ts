import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { recordClusterNodes } from "../instances/nodes.ts";
import { recoverLostInstances } from "../instances/recover.ts";

/** An operator's re-creation of a lost node's instances from their latest backups (0167). */
export async function recoverNodeJob(payload: JobPayload<"recover-node">) {
  const recovered = await recoverLostInstances(payload.nodeId);
  await recordClusterNodes();
  return { nodeId: payload.nodeId, recovered };
}
