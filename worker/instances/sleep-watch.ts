import { channelSettings } from "../../app/server/agents/channels.server.ts";
import { requestWake } from "../../app/server/agents/wake.server.ts";
import { telegramPendingUpdate } from "../../app/server/channels/telegram.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { log } from "./engine.ts";

// The channel watcher of sleeping agents (decision 0164): every SLEEP_WATCH_INTERVAL_MS each
// worker peeks at each sleeping agent's Telegram bot. A peek is getUpdates without an offset,
// which confirms nothing (telegramPendingUpdate), so the message stays for the gateway: the
// watcher only wakes it, and the woken gateway reads the message itself. Discord's gateway
// (a WebSocket session, no queue to peek at) and WhatsApp Web cannot be watched this way.

/** Peeks once at every sleeping agent's bot; returns the instances it asked to wake. */
export async function watchSleepers(): Promise<string[]> {
  const sleepers = await db()<
    { instance_id: string; user_id: string; telegram_seen_update_id: string | null }[]
  >`
    select s.instance_id, i.user_id, s.telegram_seen_update_id::text
    from instance_sleep s join instances i on i.id = s.instance_id
    where i.observed_state = 'sleeping' and s.wake_requested_at is null`;
  const woken: string[] = [];
  for (const sleeper of sleepers) {
    const telegram = (await channelSettings(sleeper.user_id)).chatapp1;
    if (!telegram) continue;
    try {
      const pending = await telegramPendingUpdate(telegram.token);
      const seen = Number(sleeper.telegram_seen_update_id ?? -1);
      if (pending !== null && pending > seen) {
        if (await requestWake(sleeper.instance_id, "telegram")) woken.push(sleeper.instance_id);
      }
    } catch (error) {
      log().warn({ err: error, instanceId: sleeper.instance_id }, "Telegram peek failed");
    }
  }
  return woken;
}

/** Starts the watcher (one pass at a time); returns a stop function. */
export function startSleepWatch(): () => void {
  const every = env().SLEEP_WATCH_INTERVAL_MS;
  if (every <= 0 || env().AGENT_SLEEP !== "on") return () => {};
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    watchSleepers()
      .catch((error: unknown) => log().warn({ err: error }, "sleep watch failed"))
      .finally(() => {
        running = false;
      });
  }, every);
  timer.unref();
  return () => clearInterval(timer);
}
