import { env } from "../platform/env.server.ts";
import { hasLiveJob, sendJob } from "../platform/jobs.server.ts";
import { logger } from "../platform/logger.server.ts";
import { getInstance, getInstanceByUser } from "./instances.server.ts";
import { markWakeRequested } from "./sleep.server.ts";

// Waking a sleeping agent (decision 0164). Whatever reaches a sleeping gateway — a web chat,
// POST /api/agent, the live socket, an ingress visit, a message on its Telegram bot — asks the
// worker to wake it (the wake-instance job); a chat then waits for the boot like any start.

export const WAKE_REASONS = ["chat", "ingress", "telegram", "start"] as const;
export type WakeReason = (typeof WAKE_REASONS)[number];

/** Asks the worker to wake the instance (once: a wake already queued or running is enough). */
export async function requestWake(instanceId: string, reason: WakeReason): Promise<boolean> {
  if (!(await markWakeRequested(instanceId, reason))) return false;
  if (await hasLiveJob("wake-instance", { instanceId })) return true;
  await sendJob("wake-instance", { instanceId });
  logger().info({ instanceId, reason }, "waking a sleeping agent");
  return true;
}

/**
 * Wakes the user's instance when it sleeps and waits (up to AGENT_WAKE_WAIT_MS) until the worker
 * has started it; the caller then waits for the boot as for any start (waitWhileStarting).
 * Returns at once when it is not asleep.
 */
export async function wakeIfSleeping(userId: string, reason: WakeReason): Promise<void> {
  const instance = await getInstanceByUser(userId);
  if (instance?.observed_state !== "sleeping") return;
  await requestWake(instance.id, reason);
  const deadline = Date.now() + env().AGENT_WAKE_WAIT_MS;
  for (let delay = 100; Date.now() + delay <= deadline; delay = Math.min(delay * 2, 500)) {
    await new Promise((r) => setTimeout(r, delay));
    if ((await getInstance(instance.id))?.observed_state !== "sleeping") return;
  }
}
