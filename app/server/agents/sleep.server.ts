import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";

// Scale-to-zero records (decision 0164): when each plan's agents go to sleep, the activity that
// keeps them awake, and what a sleeping agent still answers (its last log lines). The worker's
// sleep and wake modules (worker/instances/sleep.ts, wake.ts) act; this module keeps the rows.

/** Idle period per plan in seconds (the instance's plan); null: that plan's agents never sleep. */
export const SLEEP_PLANS: Record<string, number | null> = {
  solo: 30 * 60,
  collective: 60 * 60,
  label: 4 * 60 * 60,
  network: null,
};

/** The idle period after which an instance on `plan` sleeps (SLEEP_IDLE_SECONDS overrides). */
export function idleSecondsOf(plan: string | null | undefined): number | null {
  const override = env().SLEEP_IDLE_SECONDS;
  if (override !== undefined) return override;
  const period = SLEEP_PLANS[plan ?? ""];
  return period === undefined ? (SLEEP_PLANS.solo as number) : period;
}

/** A chat is being relayed to the user's gateway: it is not idle. */
export async function touchActivity(userId: string): Promise<void> {
  await db()`update instances set last_activity_at = now() where user_id = ${userId}`;
}

export interface SleepRow {
  instance_id: string;
  slept_at: Date;
  log_lines: string[];
  telegram_seen_update_id: string | null;
  wake_reason: string | null;
  wake_requested_at: Date | null;
}

export async function sleepRecord(instanceId: string): Promise<SleepRow | undefined> {
  const [row] = await db()<SleepRow[]>`
    select * from instance_sleep where instance_id = ${instanceId}`;
  return row;
}

/**
 * Marks a running instance asleep, before its gateway is stopped, unless a chat touched it after
 * `idleSince` (the idle check's cut-off). A chat touches the instance before it looks at the
 * state: one that came after the check either stops this mark, or sees `sleeping` and asks for a
 * wake, which runs once the sleep pass lets go of the instance's lock. So no chat reaches a
 * gateway that is being stopped.
 */
export async function markAsleep(instanceId: string, idleSince: Date): Promise<boolean> {
  const rows = await db()`
    update instances set observed_state = 'sleeping', health = 'unknown', observed_at = now()
    where id = ${instanceId} and observed_state = 'running'
      and (last_activity_at is null or last_activity_at <= ${idleSince})
    returning id`;
  return rows.length > 0;
}

/**
 * Takes back a mark of markAsleep whose gateway could not be stopped: the instance is running
 * (its health re-observed by the next pass), and a wake asked for meanwhile is moot.
 */
export async function unmarkAsleep(instanceId: string): Promise<void> {
  await db().begin(async (sql) => {
    await sql`update instances set observed_state = 'running', health = 'unknown',
        observed_at = now()
      where id = ${instanceId} and observed_state = 'sleeping'`;
    await sql`delete from instance_sleep where instance_id = ${instanceId}`;
  });
}

/**
 * Records the sleep's last log lines and Telegram position (after the stop). A wake asked for
 * since the instance was marked asleep is kept: its job runs after the sleep pass.
 */
export async function recordSleep(
  instanceId: string,
  input: { logLines: string[]; telegramSeenUpdateId: number | null },
): Promise<void> {
  await db()`
    insert into instance_sleep (instance_id, log_lines, telegram_seen_update_id)
    values (${instanceId}, ${db().json(input.logLines as never)}, ${input.telegramSeenUpdateId})
    on conflict (instance_id) do update set slept_at = now(), log_lines = excluded.log_lines,
      telegram_seen_update_id = excluded.telegram_seen_update_id`;
}

/** Notes why a wake was asked for (the first reason wins); false when the instance is awake. */
export async function markWakeRequested(instanceId: string, reason: string): Promise<boolean> {
  const rows = await db()`
    insert into instance_sleep (instance_id, wake_reason, wake_requested_at)
    select id, ${reason}, now() from instances
    where id = ${instanceId} and observed_state = 'sleeping'
    on conflict (instance_id) do update set
      wake_reason = coalesce(instance_sleep.wake_reason, excluded.wake_reason),
      wake_requested_at = coalesce(instance_sleep.wake_requested_at, excluded.wake_requested_at)
    returning instance_id`;
  return rows.length > 0;
}

export async function clearSleep(instanceId: string): Promise<void> {
  await db()`delete from instance_sleep where instance_id = ${instanceId}`;
}
