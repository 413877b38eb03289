import { scheduledBackups } from "../instances/backup-schedule.ts";

/** Periodic: queues each plan's due backups and prunes past retention (decision 0140). */
export async function scheduledBackupsJob() {
  return scheduledBackups();
}
