import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { updateImage } from "../instances.ts";

/** Recreates the container on the newest built image, keeping the volume; rolls back on failure. */
export async function updateImageJob(payload: JobPayload<"update-image">) {
  return updateImage(payload.instanceId);
}
