import {
  type ActionOutcome,
  getInstance,
  getInstanceByUser,
} from "../../app/server/agents/instances.server.ts";
import { hasActiveSubscription } from "../../app/server/billing/subscriptions.server.ts";
import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { runAction } from "../instances/actions.ts";
import { withInstanceLock } from "../instances/lock.ts";

/**
 * Stops the instance of a user whose plan was canceled, at the end of the paid period. The
 * subscription is read again first: a user who subscribed again in between keeps running.
 */
export async function stopUnpaidInstance({ userId }: JobPayload<"stop-unpaid-instance">) {
  if (await hasActiveSubscription(userId)) return { userId, stopped: false, reason: "subscribed" };
  const found = await getInstanceByUser(userId);
  if (!found) return { userId, stopped: false, reason: "no instance" };
  const outcome = await withInstanceLock(found.id, async () => {
    const row = await getInstance(found.id);
    return row ? runAction(row, "stop") : ({ ok: true } as ActionOutcome);
  });
  // A failed stop (engine down) is retried by the queue.
  if (!outcome.ok) throw new Error(`stopping ${found.id} failed: ${outcome.message ?? "unknown"}`);
  return { userId, stopped: true };
}
