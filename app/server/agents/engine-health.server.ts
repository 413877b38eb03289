import { db } from "../platform/db.server.ts";

// The container engine's health is part of the platform's state (issue 24): workers record what
// their check of the engine saw; the web reads it, so while the engine does not answer nothing
// reports an instance as running on the strength of an old observation.

/** Tells this platform's Docker objects (and its engine record) from another deployment's. */
export const runtimeDeployment = () => process.env.RUNTIME_DEPLOYMENT || "default";

export interface EngineHealth {
  reachable: boolean;
  checkedAt: Date;
  /** When `reachable` last changed. */
  changedAt: Date;
  /** When it last stopped answering (kept after it answers again); null if it never did. */
  lostAt: Date | null;
  lastError: string | null;
  /**
   * Whether the engine keeps gateways running while it restarts (Docker's live-restore,
   * decision 0239); null where the driver has no such setting or it was not read yet.
   */
  liveRestore: boolean | null;
}

/**
 * Records one check of the engine; returns whether it answered at the previous check (undefined
 * for the first one). While it does not answer, every provisioned instance is marked `unknown`:
 * its last observation can no longer be vouched for.
 */
export async function recordEngineCheck(
  reachable: boolean,
  error?: string,
): Promise<boolean | undefined> {
  const deployment = runtimeDeployment();
  const [row] = await db()<{ previous: boolean | null }[]>`
    with prev as (select reachable from runtime_engines where deployment = ${deployment})
    insert into runtime_engines (deployment, reachable, checked_at, changed_at, last_error,
      lost_at)
    values (${deployment}, ${reachable}, now(), now(), ${error?.slice(0, 500) ?? null},
      case when ${reachable}::boolean then null else now() end)
    on conflict (deployment) do update set
      reachable = excluded.reachable,
      checked_at = excluded.checked_at,
      changed_at = case when runtime_engines.reachable = excluded.reachable
                        then runtime_engines.changed_at else excluded.changed_at end,
      last_error = excluded.last_error,
      lost_at = case when runtime_engines.reachable and not excluded.reachable
                     then excluded.checked_at else runtime_engines.lost_at end
    returning (select reachable from prev) as previous`;
  if (!reachable) {
    await db()`
      update instances set observed_state = 'unknown', health = 'unknown', updated_at = now()
      where container_id is not null and observed_state <> 'unknown'`;
  }
  return row?.previous ?? undefined;
}

/** Records whether the engine keeps gateways running while it restarts (read when it answers). */
export async function recordLiveRestore(liveRestore: boolean | null): Promise<void> {
  await db()`update runtime_engines set live_restore = ${liveRestore}
    where deployment = ${runtimeDeployment()}`;
}

/** Records the engine host's CPU count (read when it answers; the turn budget's size). */
export async function recordEngineCpus(cpus: number): Promise<void> {
  await db()`update runtime_engines set cpus = ${cpus} where deployment = ${runtimeDeployment()}`;
}

/** The engine as the workers last saw it; undefined before any worker checked. */
export async function engineHealth(): Promise<EngineHealth | undefined> {
  const [row] = await db()<
    {
      reachable: boolean;
      checked_at: Date;
      changed_at: Date;
      last_error: string | null;
      lost_at: Date | null;
      live_restore: boolean | null;
    }[]
  >`select reachable, checked_at, changed_at, last_error, lost_at, live_restore from runtime_engines
    where deployment = ${runtimeDeployment()}`;
  return (
    row && {
      reachable: row.reachable,
      checkedAt: row.checked_at,
      changedAt: row.changed_at,
      lostAt: row.lost_at,
      lastError: row.last_error,
      liveRestore: row.live_restore,
    }
  );
}

/** False only when a worker saw the engine not answering at its last check. */
export async function engineAnswers(): Promise<boolean> {
  return (await engineHealth())?.reachable !== false;
}
