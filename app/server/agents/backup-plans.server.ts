// How often each plan's agents are backed up and how many scheduled backups are kept
// (docs/decisions/0140-backups.md): the worker's schedule follows it, and the backup figures
// (ops/figures.server.ts) tell from it which agents are overdue.

export interface BackupPlan {
  /** Hours between two scheduled backups. */
  everyHours: number;
  /** Scheduled backups kept per agent (the oldest go first). */
  keepScheduled: number;
}

/** Per plan (the instance's); unknown plans get solo's. */
export const BACKUP_PLANS: Record<string, BackupPlan> = {
  solo: { everyHours: 24, keepScheduled: 7 },
  collective: { everyHours: 12, keepScheduled: 14 },
  label: { everyHours: 6, keepScheduled: 28 },
  network: { everyHours: 1, keepScheduled: 72 },
};

export const backupPlan = (plan: string | null | undefined): BackupPlan =>
  BACKUP_PLANS[plan ?? ""] ?? (BACKUP_PLANS.solo as BackupPlan);
