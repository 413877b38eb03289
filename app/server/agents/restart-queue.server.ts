import { db } from "../platform/db.server.ts";
import { hasLiveJob, liveJobField } from "../platform/jobs.server.ts";

// The line of reconcile's restarts (decision 0240). A gateway that went down (the engine's
// restart stopped it, or it crashed) is restarted by a restart-instance job that waits its turn
// for one of its node's boot slots, the same slots wakes take (0221). The line is the order in
// which the restarts were queued (instance_restarts.requested_at, kept when a job is retried or
// queued again); only restarts whose job is alive (to run, running, to retry) hold a place, so a
// job that gave up never blocks the line, and only instances still meant to run.

/** The instance's restart is queued (waiting or booting): reconcile's pass records it once. */
export async function joinRestartLine(instanceId: string): Promise<void> {
  // A place already held (a job that gave up, queued again) is kept: first lost, first back.
  await db()`
    insert into instance_restarts (instance_id) values (${instanceId})
    on conflict (instance_id) do update set node = null, started_at = null`;
}

/** The restart ended (booted, given up, or nothing to do): the instance leaves the line. */
export async function leaveRestartLine(instanceId: string): Promise<void> {
  await db()`delete from instance_restarts where instance_id = ${instanceId}`;
}

/** Whether a restart-instance job of the instance is alive: reconcile queues no second one. */
export function restartJobLive(instanceId: string): Promise<boolean> {
  return hasLiveJob("restart-instance", { instanceId });
}

/**
 * Whether a restart of the instance is queued and not ended: its gateway is down on its way
 * back, so it is `starting`, not `stopped` or `crashed` (the sampler's observation).
 */
export async function restartPending(instanceId: string): Promise<boolean> {
  const [row] = await db()`select 1 from instance_restarts where instance_id = ${instanceId}`;
  return row !== undefined;
}

export interface RestartTurn {
  /** The instance is still meant to run and its restart still queued (else: nothing to do). */
  wanted: boolean;
  /** Restarts queued before this one on its node that still wait (0: its turn). */
  ahead: number;
}

/** The worker's look at the line for the restart it runs. */
export async function takeRestartTurn(instanceId: string): Promise<RestartTurn> {
  const live = await liveJobField("restart-instance", "instanceId");
  const [row] = await db()<{ ahead: number }[]>`
    with me as (
      select r.instance_id, r.requested_at, r.node from instance_restarts r
      join instances i on i.id = r.instance_id
      where r.instance_id = ${instanceId}
        and i.desired_state = 'running' and i.observed_state <> 'sleeping')
    select (
      select count(*) from instance_restarts o join instances oi on oi.id = o.instance_id
      where o.started_at is null and o.instance_id = any(${live}::text[])
        and oi.desired_state = 'running' and oi.observed_state <> 'sleeping'
        and (o.requested_at, o.instance_id) < (me.requested_at, me.instance_id)
        -- Per node, as wakes: one whose worker has not said its node yet counts as any node's.
        and (me.node is null or o.node is null or o.node = me.node)
    )::int as ahead
    from me`;
  return row ? { wanted: true, ahead: row.ahead } : { wanted: false, ahead: 0 };
}

/** The node whose slots the restart takes: its place in line is among that node's restarts. */
export async function markRestartNode(instanceId: string, node: string): Promise<void> {
  await db()`update instance_restarts set node = ${node} where instance_id = ${instanceId}`;
}

/** The restart took a slot: it leaves the line (the row stays until the restart ends). */
export async function markRestartStarted(instanceId: string): Promise<void> {
  await db()`update instance_restarts set started_at = now() where instance_id = ${instanceId}`;
}

/** A restart job (re)starting waits in its old place, whatever a dead attempt had marked. */
export async function markRestartBackInLine(instanceId: string): Promise<void> {
  await db()`update instance_restarts set started_at = null where instance_id = ${instanceId}`;
}

/**
 * Restarts on the node that wait for a slot (a restart whose worker has not said its node yet
 * counts as any node's): a pool fill there lets them go first (decision 0241).
 */
export async function restartsWaitingOn(node: string): Promise<number> {
  const live = await liveJobField("restart-instance", "instanceId");
  const [row] = await db()<{ n: number }[]>`
    select count(*)::int as n from instance_restarts r join instances i on i.id = r.instance_id
    where r.started_at is null and r.instance_id = any(${live}::text[])
      and i.desired_state = 'running' and i.observed_state <> 'sleeping'
      and (r.node is null or r.node = ${node})`;
  return row?.n ?? 0;
}
