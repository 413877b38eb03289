import { recordError } from "../../app/server/agents/instances.server.ts";
import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { queueAgentSync } from "../instances/agents-sync.ts";
import { isUnavailable } from "../instances/engine.ts";
import { updateImage } from "../instances/update-image.ts";
import { queueWarmUp } from "../instances/warm-up.ts";

/** Recreates the container on the newest built image, keeping the volume; rolls back on failure. */
export async function updateImageJob(payload: JobPayload<"update-image">) {
  let result: Awaited<ReturnType<typeof updateImage>>;
  try {
    result = await updateImage(payload.instanceId);
  } catch (error) {
    // Never lost without a word: the reason is on the instance, and the job is retried.
    if (isUnavailable(error)) {
      await recordError(
        payload.instanceId,
        `update waits for the engine: ${(error as Error).message}`,
      );
    }
    throw error;
  }
  // A recreated gateway gets the stored agents again (the rows are the truth), and its dry run.
  if ("updated" in result || "rolledBack" in result) {
    await queueAgentSync(payload.instanceId);
    await queueWarmUp(payload.instanceId);
  }
  return result;
}
