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

/** Records that the instance went to sleep, with its last log lines and Telegram position. */
export async function recordSleep(
  instanceId: string,
  input: { logLines: string[]; telegramSeenUpdateId: number | null },
): Promise<void> {
  await db()`
    insert into instance_sleep (instance_id, log_lines, telegram_seen_update_id)
    values (${instanceId}, ${db().json(input.logLines as never)}, ${input.telegramSeenUpdateId})
    on conflict (instance_id) do update set slept_at = now(), log_lines = excluded.log_lines,
      telegram_seen_update_id = excluded.telegram_seen_update_id, wake_reason = null,
      wake_requested_at = null`;
}

/** Notes why a wake was asked for (the first reason wins); false when the instance is awake. */
export async function markWakeRequested(instanceId: string, reason: string): Promise<boolean> {
  const rows = await db()`
    update instance_sleep set wake_reason = coalesce(wake_reason, ${reason}),
      wake_requested_at = coalesce(wake_requested_at, now())
    where instance_id = ${instanceId} returning instance_id`;
  return rows.length > 0;
}

export async function clearSleep(instanceId: string): Promise<void> {
  await db()`delete from instance_sleep where instance_id = ${instanceId}`;
}
