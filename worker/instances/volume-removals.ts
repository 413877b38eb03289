import { db } from "../../app/server/platform/db.server.ts";
import { RuntimeUnavailableError, VolumeStuckError } from "../runtime/index.ts";
import { log, rt } from "./engine.ts";

// A state volume the platform is done with, whose removal the engine cannot do for now: it
// still counts the volume as mounted although nothing uses it, or it does not answer (decision
// 0248). The operation that removed it (a teardown, a restore, a pooled gateway's discard)
// finishes; the volume waits in volume_removals, reconcile tries again every pass, and it goes
// once the engine answers (has restarted).

export type Removal = "removed" | "deferred";

/** Removes the volume, or records it for later when the engine cannot remove it for now. */
export async function removeVolumeOrDefer(volume: string): Promise<Removal> {
  try {
    await rt().removeVolume(volume);
    return "removed";
  } catch (error) {
    // Unreachable: a restore that failed while the engine was away left its fresh volume (the
    // soak); its record says "failed", so nothing else would remove it.
    const later = error instanceof VolumeStuckError || error instanceof RuntimeUnavailableError;
    if (!later) throw error;
    await db()`
      insert into volume_removals (volume, reason) values (${volume}, ${(error as Error).message})
      on conflict (volume) do update
        set reason = excluded.reason, tried_at = now(),
            attempts = volume_removals.attempts + 1`;
    log().warn({ volume, reason: (error as Error).message }, "a volume's removal is deferred");
    return "deferred";
  }
}

/** Is the volume an instance's or a pooled gateway's again (its name is in use)? */
async function claimed(volume: string): Promise<boolean> {
  const [row] = await db()`
    select 1 from instances where volume_name = ${volume} or volume_name || '-prev' = ${volume}
    union all select 1 from gateway_pool where volume_name = ${volume}
    limit 1`;
  return row !== undefined;
}

/** Reconcile's pass over the deferred removals; returns the volumes removed now. */
export async function retryVolumeRemovals(): Promise<string[]> {
  const rows = await db()<{ volume: string }[]>`
    select volume from volume_removals order by deferred_at`;
  const removed: string[] = [];
  for (const { volume } of rows) {
    // Names are never reused (a restore's fresh volume has a random suffix), but a removal is
    // never worth a tenant's state: a claimed name leaves the list instead.
    if (await claimed(volume)) {
      log().error({ volume }, "a deferred volume removal names a volume in use; dropped");
    } else {
      try {
        await rt().removeVolume(volume);
        removed.push(volume);
      } catch (error) {
        if (!(error instanceof VolumeStuckError || error instanceof RuntimeUnavailableError))
          log().warn({ volume, err: error }, "a deferred volume removal failed");
        await db()`
          update volume_removals set tried_at = now(), attempts = attempts + 1
          where volume = ${volume}`;
        continue;
      }
    }
    await db()`delete from volume_removals where volume = ${volume}`;
  }
  if (removed.length) log().info({ volumes: removed }, "deferred volume removals done");
  return removed;
}
