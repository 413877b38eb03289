import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { reconcileAll } from "../instances.ts";

/** Periodic: desired vs observed state of every instance; heals, records OOM kills, removes orphans. */
export async function reconcile(_payload: JobPayload<"reconcile">) {
  return reconcileAll();
}
