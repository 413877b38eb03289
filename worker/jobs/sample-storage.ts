import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { sampleStorage } from "../instances/storage-limits.ts";

/** Periodic, and at once for one user after an upgrade or an operator's change (0216, 0217). */
export async function sampleStorageJob(payload: JobPayload<"sample-storage">) {
  return { volumes: await sampleStorage(payload.userId) };
}
