import {
  getInstance,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { clearSleep, sleepRecord } from "../../app/server/agents/sleep.server.ts";
import { ensureContainer } from "./container.ts";
import { log } from "./engine.ts";
import { waitHealthy } from "./health.ts";
import { withInstanceLock } from "./lock.ts";
import { observe } from "./observe.ts";

// Waking a sleeping instance (decision 0164): the same container starts again on the same volume
// (sessions, memory, pairing and channel config are all there), so nothing is re-applied; the
// gateway reads a channel's waiting messages itself once it polls again.

/** Starts a sleeping instance and waits until its gateway is healthy (the caller holds the lock). */
export async function wakeInstance(row: InstanceRow): Promise<{ woke: boolean; ms?: number }> {
  if (row.observed_state !== "sleeping") return { woke: false };
  const t0 = Date.now();
  const reason = (await sleepRecord(row.id))?.wake_reason ?? "unknown";
  const info = await ensureContainer(row); // records `starting`: waiting chats wait for the boot
  await clearSleep(row.id);
  await updateInstance(row.id, { last_activity_at: new Date() });
  await waitHealthy(info);
  await observe((await getInstance(row.id)) as InstanceRow);
  const ms = Date.now() - t0;
  log().info({ instanceId: row.id, reason, ms }, "sleeping instance woken");
  return { woke: true, ms };
}

/** The wake-instance job: idempotent (an instance that is awake is left alone). */
export async function wakeById(instanceId: string) {
  return withInstanceLock(instanceId, async () => {
    const row = await getInstance(instanceId);
    if (!row) return { woke: false, reason: "no such instance" };
    return wakeInstance(row);
  });
}
