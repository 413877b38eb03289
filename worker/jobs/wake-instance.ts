import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { wakeById } from "../instances/wake.ts";
import type { JobContext } from "./context.ts";

/** Wakes one sleeping instance (decision 0164) once its turn comes (0221); idempotent. */
export async function wakeInstanceJob(payload: JobPayload<"wake-instance">, ctx?: JobContext) {
  return wakeById(payload.instanceId, ctx?.signal);
}
