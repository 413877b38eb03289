import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { reconcileAll } from "../instances/reconcile.ts";

/**
 * Periodic: desired vs observed state of every instance; heals, records OOM kills, removes
 * orphans. A restarted gateway's agents are re-applied by its restart job after the boot.
 */
export async function reconcile(_payload: JobPayload<"reconcile">) {
  return reconcileAll();
}
