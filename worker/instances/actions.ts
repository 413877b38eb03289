import {
  getInstance,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { failRun } from "../../app/server/agents/progress.server.ts";
import { clearSleep } from "../../app/server/agents/sleep.server.ts";
import { GatewayUnavailableError } from "../../app/server/openclaw/errors.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import type { ContainerInfo } from "../runtime/index.ts";
import { weighForBoot } from "./boot-weight.ts";
import { ensureContainer } from "./container.ts";
import { gatewayAddress, isUp, rt } from "./engine.ts";
import { reapplyConfig } from "./gateway-config.ts";
import { waitHealthy } from "./health.ts";
import { tryInstanceLock, withInstanceLock } from "./lock.ts";
import { BUSY } from "./node-slots.ts";
import { observe } from "./observe.ts";
import { resetMemory } from "./reset-memory.ts";
import { type RunProgress, startRun } from "./run-progress.ts";
import { withUserBootSlot } from "./user-boot.ts";

// Lifecycle actions (the instance-action job). Each records the desired state first, so
// reconcile heals towards it if the action is cut short. A start, restart or repair boots its
// gateway in one of its node's boot slots (user-boot.ts, decision 0241), without holding the
// instance's lock while it waits or while the gateway comes up: a user's stop never waits for a
// boot (the boot's health wait ends when the container stops).

export type InstanceAction = "start" | "stop" | "restart" | "repair" | "reset-memory";
export type ActionResult = { ok: true; status?: string; message?: string };

/**
 * Desired running again, with a clean crash backoff (the user asked for it). A sleeping instance
 * is thereby woken: its sleep record goes (decision 0164).
 */
async function wantRunning(row: InstanceRow) {
  await clearSleep(row.id);
  return updateInstance(row.id, { desired_state: "running", crash_restarts: 0 });
}

/**
 * The lifecycle answers `running` (the contract), so it is true when it is given: the action
 * waits for the gateway's /healthz and records it (observe), and a read straight after says
 * `running` too (issue 52: restart answered `running`, the next GET `starting`). Bounded by the
 * web's wait: a gateway that does not answer by then is a 502, as the engine not answering is.
 */
async function answering(row: InstanceRow, info: ContainerInfo): Promise<ActionResult> {
  const { GATEWAY_HEALTH_TIMEOUT_MS, INSTANCE_ACTION_TIMEOUT_MS } = env();
  await waitHealthy(info, Math.min(GATEWAY_HEALTH_TIMEOUT_MS, INSTANCE_ACTION_TIMEOUT_MS));
  // Healthy and ready are recorded by the observation that sees the gateway answer.
  await observe((await getInstance(row.id)) as InstanceRow);
  return { ok: true, status: "running" };
}

/**
 * `fn` on the row as it is now, under the instance's lock taken with a try (a slot holder never
 * waits for it: node-slots.ts), if the instance is still meant to run; BUSY when another
 * operation holds the lock. A user's stop while the boot waited for its slot wins: the boot
 * starts nothing and answers 502, as a start cut short by the engine does.
 */
async function ifStillWanted<T>(
  instanceId: string,
  fn: (row: InstanceRow) => Promise<T>,
): Promise<T | typeof BUSY> {
  const done = await tryInstanceLock(instanceId, async () => {
    const row = await getInstance(instanceId);
    if (row?.desired_state !== "running") {
      throw new GatewayUnavailableError("the instance was stopped before its gateway could start");
    }
    return { value: await fn(row) };
  });
  return done ? done.value : BUSY;
}

/**
 * The desired state recorded first, under the instance's lock (so reconcile heals towards it if
 * the action is cut short), once the boot has its place in line (so reconcile leaves the
 * gateway to it); the boot then waits for a slot without the lock (decision 0241).
 */
function wantRunningLocked(row: InstanceRow): Promise<InstanceRow> {
  return withInstanceLock(row.id, () => wantRunning(row));
}

async function start(row: InstanceRow, signal?: AbortSignal): Promise<ActionResult> {
  const run = await startRun(row.id, "start");
  // Up already (or booting by another's hand): nothing to boot, only its health to await.
  const up = await rt().inspect(row.container_name);
  if (up?.running) {
    await wantRunningLocked(row);
    return answering(row, up);
  }
  return withUserBootSlot(
    row.id,
    async () => {
      const info = await ifStillWanted(row.id, async (now) => {
        const created = await ensureContainer(now);
        await run.step("container-created");
        return created;
      });
      return info === BUSY ? BUSY : answering(row, info);
    },
    { signal, before: () => wantRunningLocked(row) },
  );
}

async function stop(row: InstanceRow): Promise<ActionResult> {
  const wanted = await updateInstance(row.id, { desired_state: "stopped" });
  const info = await rt().inspect(wanted.container_name);
  if (isUp(info)) await rt().stop(info.id, 10);
  await updateInstance(row.id, {
    observed_state: "stopped",
    health: "unknown",
    // A stopped container's address is the engine's to give away (decision 0195).
    gateway_address: null,
    observed_at: new Date(),
  });
  return { ok: true, status: "stopped" };
}

/** A running container restarts in place; one that is not running is (re)created and started. */
async function restartContainer(row: InstanceRow, run: RunProgress): Promise<ContainerInfo> {
  const info = await rt().inspect(row.container_name);
  if (!info?.running) {
    const created = await ensureContainer(row);
    await run.step("container-created");
    return created;
  }
  await weighForBoot(row, info.id);
  await rt().restart(info.id, 10);
  await run.step("container-created");
  const now = await rt().inspect(info.id);
  await updateInstance(row.id, {
    observed_state: "starting",
    health: "unknown",
    gateway_address: gatewayAddress(now) ?? null,
    started_at: now?.startedAt ? new Date(now.startedAt) : row.started_at,
    observed_at: new Date(),
  });
  if (!now) throw new GatewayUnavailableError("the gateway container vanished on restart");
  return now;
}

async function restart(row: InstanceRow, signal?: AbortSignal): Promise<ActionResult> {
  const run = await startRun(row.id, "restart");
  return withUserBootSlot(
    row.id,
    async () => {
      const info = await ifStillWanted(row.id, (now) => restartContainer(now, run));
      return info === BUSY ? BUSY : answering(row, info);
    },
    { signal, before: () => wantRunningLocked(row) },
  );
}

/** Recreates the container from the same volume, then re-applies the platform's config. */
async function repair(row: InstanceRow, signal?: AbortSignal): Promise<ActionResult> {
  const run = await startRun(row.id, "repair");
  const info = await withUserBootSlot(
    row.id,
    async () => {
      const created = await ifStillWanted(row.id, async (now) => {
        const made = await ensureContainer(now, { recreate: true });
        await run.step("container-created");
        return made;
      });
      if (created === BUSY) return BUSY;
      await waitHealthy(created);
      await run.step("gateway-healthy");
      return created;
    },
    { signal, before: () => wantRunningLocked(row) },
  );
  // Out of the slot: the boot is over; the config is the instance's, under its lock.
  await withInstanceLock(row.id, async () => {
    const fresh = (await getInstance(row.id)) as InstanceRow;
    await reapplyConfig(fresh, gatewayAddress(info) as string);
    await run.step("paired");
    await observe(fresh);
  });
  await run.step("ready");
  return { ok: true, message: "Instance repaired: container recreated, configuration re-applied" };
}

const actions: Record<
  InstanceAction,
  (row: InstanceRow, signal?: AbortSignal) => Promise<ActionResult>
> = {
  start,
  stop,
  restart,
  repair,
  "reset-memory": resetMemory,
};

/** The actions that boot a gateway: they take the instance's lock themselves (decision 0241). */
export const BOOT_ACTIONS: ReadonlySet<InstanceAction> = new Set(["start", "restart", "repair"]);

/**
 * Runs one lifecycle action; throws when the engine or gateway fails (the job classes it). The
 * caller holds the instance's lock for a stop or a memory reset, and not for a boot action
 * (BOOT_ACTIONS), which waits for a slot without it and takes it for its steps.
 */
export async function runAction(
  row: InstanceRow,
  action: InstanceAction,
  signal?: AbortSignal,
): Promise<ActionResult> {
  try {
    return await actions[action](row, signal);
  } catch (error) {
    // A start-up cut short ends its progress run as failed (decision 0158).
    if (BOOT_ACTIONS.has(action)) await failRun(row.id);
    throw error;
  }
}
