import { getBackup } from "../../app/server/agents/backups.server.ts";
import { getInstanceByUser } from "../../app/server/agents/instances.server.ts";
import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { queueAgentSync } from "../instances/agents-sync.ts";
import { restoreBackup } from "../instances/restore.ts";

/** Restores a backup; on success the restored configuration is written into the gateway. */
export async function restoreBackupJob(payload: JobPayload<"restore-backup">) {
  const outcome = await restoreBackup(payload.backupId);
  if (outcome.ok) {
    const backup = await getBackup(payload.backupId);
    const row = backup && (await getInstanceByUser(backup.user_id));
    if (row) await queueAgentSync(row.id);
  }
  return outcome;
}
