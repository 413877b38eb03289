import { db } from "../platform/db.server.ts";
import { liveJobField } from "../platform/jobs.server.ts";

// The queue of wakes (decision 0221). A wake asked for (markWakeRequested) waits its turn in
// order of its request; the worker running its job looks every 100 ms and takes one of the
// node's wake slots when no wake asked for earlier on that node still waits. Only requests whose
// wake-instance job is still alive (to run, running or to retry) hold a place: one whose job
// gave up never blocks the line. The web shows the same order: "waking, 2 ahead of you".

/** Wakes asked for before this instance's that still wait (null: its wake does not wait). */
async function waitingAhead(instanceId: string, live: string[]): Promise<WakeQueuePlace | null> {
  const [row] = await db()<{ requested_at: Date; ahead: number }[]>`
    with me as (
      select s.instance_id, s.wake_requested_at, s.wake_node from instance_sleep s
      join instances i on i.id = s.instance_id
      where s.instance_id = ${instanceId} and i.observed_state = 'sleeping'
        and s.wake_requested_at is not null and s.wake_started_at is null)
    select me.wake_requested_at as requested_at, (
      select count(*) from instance_sleep o join instances oi on oi.id = o.instance_id
      where oi.observed_state = 'sleeping' and o.wake_started_at is null
        and o.wake_requested_at is not null and o.instance_id = any(${live}::text[])
        and (o.wake_requested_at, o.instance_id) < (me.wake_requested_at, me.instance_id)
        -- Per node: a wake waits only behind wakes on its own node (one whose worker has not
        -- said its node yet counts as any node's).
        and (me.wake_node is null or o.wake_node is null or o.wake_node = me.wake_node)
    )::int as ahead
    from me`;
  return row ? { ahead: row.ahead, requestedAt: row.requested_at } : null;
}

export interface WakeQueuePlace {
  /** Wakes asked for before this one that have not started yet. */
  ahead: number;
  requestedAt: Date;
}

/** Where the instance's wake waits, or null when none waits (awake, or already waking). */
export async function wakeQueuePlace(instanceId: string): Promise<WakeQueuePlace | null> {
  return waitingAhead(instanceId, await liveJobField("wake-instance", "instanceId"));
}

export interface WakeTurn {
  /** The instance still sleeps (else there is nothing to wake, and no slot is needed). */
  sleeping: boolean;
  /** Wakes ahead of it that still wait (0: its turn). */
  ahead: number;
}

/** The worker's look at the line for the wake it runs. */
export async function takeWakeTurn(instanceId: string): Promise<WakeTurn> {
  const [state] = await db()<{ observed_state: string }[]>`
    select observed_state from instances where id = ${instanceId}`;
  if (state?.observed_state !== "sleeping") return { sleeping: false, ahead: 0 };
  const place = await wakeQueuePlace(instanceId);
  return { sleeping: true, ahead: place?.ahead ?? 0 };
}

/** The node the instance's gateway wakes on: its place in line is among that node's wakes. */
export async function markWakeNode(instanceId: string, node: string): Promise<void> {
  await db()`update instance_sleep set wake_node = ${node} where instance_id = ${instanceId}`;
}

/** The wake took a slot: it leaves the line (the sleep record goes once the gateway starts). */
export async function markWakeStarted(instanceId: string): Promise<void> {
  await db()`update instance_sleep set wake_started_at = now() where instance_id = ${instanceId}`;
}

/** A wake that failed goes back to its place in the line: its job's retry waits its turn. */
export async function markWakeBackInLine(instanceId: string): Promise<void> {
  await db()`update instance_sleep set wake_started_at = null where instance_id = ${instanceId}`;
}
