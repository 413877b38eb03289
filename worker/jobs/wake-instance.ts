import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { wakeById } from "../instances/wake.ts";

/** Wakes one sleeping instance (decision 0164); idempotent. */
export async function wakeInstanceJob(payload: JobPayload<"wake-instance">) {
  return wakeById(payload.instanceId);
}
