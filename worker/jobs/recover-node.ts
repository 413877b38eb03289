import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { runRecoveryJob } from "../instances/nodes.ts";

/** An operator's re-creation of a lost node's instances from their latest backups (0167). */
export async function recoverNodeJob(payload: JobPayload<"recover-node">) {
  return runRecoveryJob(payload.nodeId);
}
