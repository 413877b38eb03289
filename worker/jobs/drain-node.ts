import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { runDrainJob } from "../instances/nodes.ts";

/** An operator's drain of a node: its instances move one at a time (decision 0167). */
export async function drainNodeJob(payload: JobPayload<"drain-node">) {
  return runDrainJob(payload.nodeId);
}
