import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { runBackupJob } from "../instances/backup.ts";

/** Takes one pending backup (on demand or scheduled): state volume and records, encrypted. */
export async function backupAgent(payload: JobPayload<"backup-agent">) {
  return runBackupJob(payload.backupId);
}
