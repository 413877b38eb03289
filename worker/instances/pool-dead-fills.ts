import { db } from "../../app/server/platform/db.server.ts";
import { currentJob } from "../jobs/context.ts";
import { log } from "./engine.ts";
import { attemptAlive } from "./leftovers.ts";
import { discardPooled } from "./pool.ts";

// A pooled gateway being started or re-warmed records the fill-pool job attempt doing it. When
// that attempt is over (its worker was killed: the heartbeat fails it within seconds; or
// stopped: released) the row would stay 'starting' and count against the pool for 20 minutes,
// its container running (issue 52). As a dead provision's leftovers are (leftovers.ts), such a
// row is discarded at the next fill or reconcile pass.

/** The pool row's columns naming the job attempt that works on it now (none outside a job). */
export function fillOwner() {
  const job = currentJob();
  return {
    fill_job: job?.name ?? null,
    fill_job_id: job?.id ?? null,
    fill_job_attempt: job?.retryCount ?? null,
  };
}

/** Discards the 'starting' pooled gateways whose job attempt is no longer active. */
export async function discardDeadFills(): Promise<string[]> {
  const rows = await db()<
    { id: string; container_name: string; job: string; job_id: string; attempt: number }[]
  >`select id, container_name, fill_job as job, fill_job_id as job_id, fill_job_attempt as attempt
    from gateway_pool
    where state = 'starting' and fill_job is not null and fill_job_id is not null
      and fill_job_attempt is not null`;
  const discarded: string[] = [];
  for (const row of rows) {
    if (await attemptAlive(row.job, row.job_id, row.attempt)) continue;
    await discardPooled(row.id, row.container_name);
    discarded.push(row.id);
  }
  if (discarded.length) log().warn({ pooled: discarded }, "discarded dead fills' pooled gateways");
  return discarded;
}
