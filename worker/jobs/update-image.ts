import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { queueAgentSync } from "../instances/agents-sync.ts";
import { updateImage } from "../instances/update-image.ts";
import { queueWarmUp } from "../instances/warm-up.ts";

/** Recreates the container on the newest built image, keeping the volume; rolls back on failure. */
export async function updateImageJob(payload: JobPayload<"update-image">) {
  const result = await updateImage(payload.instanceId);
  // A recreated gateway gets the stored agents again (the rows are the truth), and its dry run.
  if ("updated" in result || "rolledBack" in result) {
    await queueAgentSync(payload.instanceId);
    await queueWarmUp(payload.instanceId);
  }
  return result;
}
