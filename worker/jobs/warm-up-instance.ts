import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { warmUpAfterBoot } from "../instances/warm-up.ts";

/** A booted tenant gateway's dry run once it is healthy (best effort; decision 0087). */
export async function warmUpInstance(payload: JobPayload<"warm-up-instance">) {
  return warmUpAfterBoot(payload.instanceId);
}
