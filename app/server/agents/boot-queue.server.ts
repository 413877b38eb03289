import { db } from "../platform/db.server.ts";
import { liveJobField } from "../platform/jobs.server.ts";

// The line of boots a user waits for (decision 0241): a lifecycle start, restart or repair, and a
// provision's cold start. Each waits its turn (first asked, first booted) for one of its node's
// boot slots, the ones wakes and reconcile's restarts take. Only boots whose job is alive (an
// instance-action or provision-instance job to run, running or to retry) hold a place, so a
// worker that died never blocks the line. Reconcile's restarts and pool fills on a node wait
// while a user's boot or wake there still waits: a user is never kept behind a line of them.

/** Instances with a live lifecycle action or provision: only their boots count. */
async function liveUserBoots(): Promise<string[]> {
  const [actions, provisions] = await Promise.all([
    liveJobField("instance-action", "instanceId"),
    liveJobField("provision-instance", "instanceId"),
  ]);
  return [...actions, ...provisions];
}

/** The instance's boot waits on `node`; a place already held is kept. */
export async function joinBootLine(instanceId: string, node: string): Promise<void> {
  await db()`
    insert into instance_boots (instance_id, node) values (${instanceId}, ${node})
    on conflict (instance_id) do update set node = excluded.node, started_at = null`;
}

/** The boot ended (healthy, failed, or given up): the instance leaves the line. */
export async function leaveBootLine(instanceId: string): Promise<void> {
  await db()`delete from instance_boots where instance_id = ${instanceId}`;
}

/** The boot took a slot: it no longer waits (the row stays until the boot ends). */
export async function markBootStarted(instanceId: string): Promise<void> {
  await db()`update instance_boots set started_at = now() where instance_id = ${instanceId}`;
}

/** User boots on the instance's node asked for before its own that still wait (0: its turn). */
export async function bootPlace(instanceId: string): Promise<number> {
  const live = await liveUserBoots();
  const [row] = await db()<{ ahead: number }[]>`
    select count(o.*)::int as ahead from instance_boots me
    join instance_boots o on o.node = me.node and o.started_at is null
      and o.instance_id = any(${live}::text[])
      and (o.requested_at, o.instance_id) < (me.requested_at, me.instance_id)
    where me.instance_id = ${instanceId}`;
  return row?.ahead ?? 0;
}

/**
 * Boots a user waits for on the node that have no slot yet: user boots and wakes (a wake whose
 * worker has not said its node yet counts as any node's). Reconcile's restarts and pool fills on
 * the node let them go first.
 */
export async function usersWaitingOn(node: string): Promise<number> {
  const [boots, wakes] = await Promise.all([
    liveUserBoots(),
    liveJobField("wake-instance", "instanceId"),
  ]);
  const [row] = await db()<{ n: number }[]>`
    select (
      (select count(*) from instance_boots b
        where b.node = ${node} and b.started_at is null and b.instance_id = any(${boots}::text[]))
      + (select count(*) from instance_sleep s join instances i on i.id = s.instance_id
        where i.observed_state = 'sleeping' and s.wake_requested_at is not null
          and s.wake_started_at is null and s.instance_id = any(${wakes}::text[])
          and (s.wake_node is null or s.wake_node = ${node}))
    )::int as n`;
  return row?.n ?? 0;
}

/**
 * A user's boot of the instance is under way (waiting or booting): reconcile leaves the gateway
 * to it, and the observation of its container still down says `starting`.
 */
export async function userBootPending(instanceId: string): Promise<boolean> {
  const [row] = await db()`select 1 from instance_boots where instance_id = ${instanceId}`;
  if (!row) return false;
  return (await liveUserBoots()).includes(instanceId);
}
