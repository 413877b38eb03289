import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { restartById } from "../instances/restart-line.ts";
import type { JobContext } from "./context.ts";

/** Restarts a gateway reconcile found down, once a boot slot is its (decision 0240); idempotent. */
export async function restartInstanceJob(
  payload: JobPayload<"restart-instance">,
  ctx?: JobContext,
) {
  return restartById(payload.instanceId, ctx?.signal);
}
