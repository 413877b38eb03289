import { type BackupRow, recordRestore } from "../../app/server/agents/backups.server.ts";
import { getInstance, getInstanceByUser } from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { hasLiveJob } from "../../app/server/platform/jobs.server.ts";
import { log, rt } from "./engine.ts";
import { tryInstanceLock } from "./lock.ts";
import { bootOn } from "./restore.ts";
import { removeVolumeOrDefer } from "./volume-removals.ts";

// A restore whose worker died part-way (killed, out of memory, the host lost) has no job left
// (restore-backup has a heartbeat and no retry, decision 0130), yet its backup still says
// `running` and the instance may sit on the half-verified fresh volume. Reconcile finds those
// and puts the agent back as it was: on the old volume, the fresh one removed, the restore
// failed with why. The records and the `restored` status commit together (restore.ts), so a
// restore still `running` never touched the records.

/** Grace for the web's row update that precedes the job's enqueueing. */
const STARTED_GRACE = "30 seconds";

export const INTERRUPTED =
  "the worker running the restore stopped before it finished; the agent is as it was";

async function undo(backup: BackupRow): Promise<string> {
  const row = await getInstanceByUser(backup.user_id);
  const fresh = backup.restore_new_volume;
  const old = backup.restore_old_volume;
  if (row) {
    const outcome = await tryInstanceLock(row.id, async () => {
      const current = await getInstance(row.id);
      if (current && fresh && old && current.volume_name === fresh) {
        if (await rt().volumeExists(old)) await bootOn(current, old);
      }
      const now = await getInstance(row.id);
      if (fresh && now?.volume_name !== fresh) await removeVolumeOrDefer(fresh);
      return "undone";
    });
    if (!outcome) return "busy"; // the lock's holder may be the restore itself: next pass
  }
  await recordRestore(backup.id, "failed", INTERRUPTED);
  return "failed";
}

/** Restores marked running with no live job: undone and marked failed. Returns their ids. */
export async function recoverInterruptedRestores(): Promise<string[]> {
  const running = await db()<BackupRow[]>`
    select * from agent_backups
    where restore_status = 'running'
      and coalesce(restore_started_at, created_at) < now() - ${STARTED_GRACE}::interval`;
  const recovered: string[] = [];
  for (const backup of running) {
    if (await hasLiveJob("restore-backup", { backupId: backup.id })) continue;
    try {
      if ((await undo(backup)) === "failed") recovered.push(backup.id);
    } catch (error) {
      log().warn({ backupId: backup.id, err: error }, "undoing an interrupted restore failed");
    }
  }
  if (recovered.length) log().warn({ backups: recovered }, "recovered interrupted restores");
  return recovered;
}
