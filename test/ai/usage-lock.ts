import type postgres from "postgres";

// The usage table held locked by another connection, so a metering flush waits at its insert
// (where a database restart or a process kill catches it): metering-retry and metering-journal.

/** Locks ai_usage until `release()`; resolves once the lock is held. */
export async function holdUsageTable(
  other: postgres.Sql,
): Promise<{ release: () => Promise<void> }> {
  let release = () => {};
  const released = new Promise<void>((r) => {
    release = r;
  });
  let locked = () => {};
  const holding = new Promise<void>((r) => {
    locked = r;
  });
  const holder = other.begin(async (t) => {
    await t`lock table ai_usage in share row exclusive mode`;
    locked();
    await released;
  });
  await holding;
  return {
    release: async () => {
      release();
      await holder;
    },
  };
}

/** The backend of a flush waiting to insert its usage rows, if one waits. */
export async function waitingFlush(other: postgres.Sql): Promise<number | undefined> {
  const [row] = await other<{ pid: number }[]>`
    select pid from pg_stat_activity
    where wait_event_type = 'Lock' and query ilike '%insert into ai_usage %'
      and pid <> pg_backend_pid()`;
  return row?.pid;
}
