import {
  getInstance,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { clearSleep, sleepRecord } from "../../app/server/agents/sleep.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { ensureContainer } from "./container.ts";
import { gatewayAddress, log, rt } from "./engine.ts";
import { waitHealthy } from "./health.ts";
import { withInstanceLock } from "./lock.ts";
import { observe } from "./observe.ts";
import { connectPaired } from "./pairing.ts";
import { startRun } from "./run-progress.ts";
import { withWakeSlot } from "./wake-slots.ts";

// Waking a sleeping instance (decision 0164): the same container starts again on the same volume
// (sessions, memory, pairing and channel config are all there), so nothing is re-applied; the
// gateway reads a channel's waiting messages itself once it polls again.

/**
 * Waits until the gateway answers its control protocol, not only /healthz: right after a boot on
 * a busy host the first hello can take longer than a chat's connect allows (measured: a woken
 * gateway healthy but without a hello within 5 s under load).
 */
async function untilItAnswers(row: InstanceRow): Promise<void> {
  const deadline = Date.now() + env().GATEWAY_HEALTH_TIMEOUT_MS;
  for (;;) {
    const info = await rt().inspect(row.container_name);
    const address = gatewayAddress(info);
    try {
      if (!address) throw new Error("the gateway has no address");
      const { client } = await connectPaired(row, address);
      client.close();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 1_000));
    }
  }
}

/** Starts a sleeping instance and waits until its gateway is healthy (the caller holds the lock). */
export async function wakeInstance(row: InstanceRow): Promise<{ woke: boolean; ms?: number }> {
  if (row.observed_state !== "sleeping") return { woke: false };
  const t0 = Date.now();
  const reason = (await sleepRecord(row.id))?.wake_reason ?? "unknown";
  const progress = await startRun(row.id, "wake");
  try {
    const info = await ensureContainer(row); // records `starting`: chats wait for the boot
    await progress.step("container-created");
    await clearSleep(row.id);
    await updateInstance(row.id, { last_activity_at: new Date() });
    await waitHealthy(info);
    await progress.step("gateway-healthy");
    await untilItAnswers((await getInstance(row.id)) as InstanceRow);
    await progress.step("paired");
    await observe((await getInstance(row.id)) as InstanceRow);
    await progress.step("ready");
  } catch (error) {
    await progress.fail();
    throw error;
  }
  const ms = Date.now() - t0;
  log().info({ instanceId: row.id, reason, ms }, "sleeping instance woken");
  return { woke: true, ms };
}

/**
 * The wake-instance job: idempotent (an instance that is awake is left alone). It waits its turn
 * for one of the platform's wake slots first (decision 0221), then for the instance's lock.
 */
export async function wakeById(instanceId: string, signal?: AbortSignal) {
  return withWakeSlot(
    instanceId,
    () =>
      withInstanceLock(instanceId, async () => {
        const row = await getInstance(instanceId);
        if (!row) return { woke: false, reason: "no such instance" };
        return wakeInstance(row);
      }),
    signal,
  );
}
