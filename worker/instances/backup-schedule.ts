import { backupPlan } from "../../app/server/agents/backup-plans.server.ts";
import {
  type BackupReason,
  type BackupRow,
  insertPendingBackup,
  removeBackup,
} from "../../app/server/agents/backups.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { sendJob } from "../../app/server/platform/jobs.server.ts";
import { log } from "./engine.ts";

// scheduled-backups: each agent backed up as often as its plan says, and every kind of backup
// kept to its number (docs/decisions/0140-backups.md). Runs on BACKUP_CRON (hourly).

export {
  BACKUP_PLANS,
  type BackupPlan,
  backupPlan,
} from "../../app/server/agents/backup-plans.server.ts";

/** Backups kept per agent for the other reasons, whatever the plan. */
export const KEEP_PER_REASON: Record<Exclude<BackupReason, "scheduled">, number> = {
  manual: 10,
  "pre-update": 3,
  "pre-restore": 3,
  imported: 3,
  "pre-delete": 1,
  "node-returned": 3,
};

/** A deleted agent's last backup is kept this long (then it goes with the agent). */
export const PRE_DELETE_KEEP_DAYS = 30;

/** Queues a backup of every agent whose last scheduled one is older than its plan's interval. */
export async function queueDueBackups(now = new Date()): Promise<number> {
  const agents = await db()<{ id: string; user_id: string; plan: string; last: Date | null }[]>`
    select a.id, a.user_id, i.plan,
      (select max(b.created_at) from agent_backups b
        where b.agent_id = a.id and b.reason = 'scheduled' and b.status <> 'failed') as last
    from agents a join instances i on i.user_id = a.user_id
    order by a.id`;
  let queued = 0;
  for (const agent of agents) {
    const dueAt = (agent.last?.getTime() ?? 0) + backupPlan(agent.plan).everyHours * 3_600_000;
    // A few minutes' slack so an hourly cron does not skip a beat on a late run.
    if (dueAt - 5 * 60_000 > now.getTime()) continue;
    const row = await insertPendingBackup(agent, "scheduled");
    await sendJob("backup-agent", { backupId: row.id });
    queued++;
  }
  return queued;
}

/** Removes backups past their reason's retention (never a pending one or one being restored). */
export async function pruneBackups(): Promise<number> {
  // A backup whose job died with its worker (retries exhausted, expired) says so, and becomes
  // prunable like any failed one.
  await db()`
    update agent_backups set status = 'failed', error = 'the backup job never finished',
      completed_at = now()
    where status = 'pending' and created_at < now() - interval '1 day'`;
  const rows = await db()<(BackupRow & { plan: string | null; rank: number })[]>`
    select b.*, i.plan, row_number() over (
      partition by b.agent_id, b.reason order by b.created_at desc, b.id desc)::int as rank
    from agent_backups b left join instances i on i.user_id = b.user_id
    where b.status <> 'pending' and b.restore_status is distinct from 'running'`;
  let removed = 0;
  for (const row of rows) {
    const keep =
      row.reason === "scheduled" ? backupPlan(row.plan).keepScheduled : KEEP_PER_REASON[row.reason];
    const expired =
      row.reason === "pre-delete" &&
      row.created_at.getTime() < Date.now() - PRE_DELETE_KEEP_DAYS * 86_400_000;
    // Failed attempts are kept only while they are the newest (they say why).
    if (row.rank <= keep && !expired && !(row.status === "failed" && row.rank > 1)) continue;
    await removeBackup(row);
    removed++;
  }
  return removed;
}

export async function scheduledBackups() {
  const queued = await queueDueBackups();
  const pruned = await pruneBackups();
  if (queued || pruned) log().info({ queued, pruned }, "scheduled backups");
  return { queued, pruned };
}
