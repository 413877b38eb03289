import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { queueAgentSync } from "../instances/agents-sync.ts";
import { reconcileAll } from "../instances/reconcile.ts";

/** Periodic: desired vs observed state of every instance; heals, records OOM kills, removes orphans. */
export async function reconcile(_payload: JobPayload<"reconcile">) {
  const result = await reconcileAll();
  // A restarted gateway gets the stored agents re-applied.
  for (const [instanceId, outcome] of Object.entries(result.instances)) {
    if (outcome.endsWith("restarted")) await queueAgentSync(instanceId);
  }
  return result;
}
