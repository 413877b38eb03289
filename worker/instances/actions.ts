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
import { ensureContainer } from "./container.ts";
import { gatewayAddress, isUp, rt } from "./engine.ts";
import { reapplyConfig } from "./gateway-config.ts";
import { waitHealthy } from "./health.ts";
import { observe } from "./observe.ts";
import { resetMemory } from "./reset-memory.ts";
import { startRun } from "./run-progress.ts";

// Lifecycle actions (the instance-action job; the caller holds the instance's lock). Each
// records the desired state first, so reconcile heals towards it if the action is cut short.

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

async function start(row: InstanceRow): Promise<ActionResult> {
  const run = await startRun(row.id, "start");
  const info = await ensureContainer(await wantRunning(row));
  await run.step("container-created");
  return answering(row, info);
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
async function restart(row: InstanceRow): Promise<ActionResult> {
  const wanted = await wantRunning(row);
  const run = await startRun(row.id, "restart");
  const info = await rt().inspect(wanted.container_name);
  if (!info?.running) {
    const created = await ensureContainer(wanted);
    await run.step("container-created");
    return answering(row, created);
  }
  await rt().restart(info.id, 10);
  await run.step("container-created");
  const now = await rt().inspect(info.id);
  await updateInstance(row.id, {
    observed_state: "starting",
    health: "unknown",
    gateway_address: gatewayAddress(now) ?? null,
    started_at: now?.startedAt ? new Date(now.startedAt) : wanted.started_at,
    observed_at: new Date(),
  });
  if (!now) throw new GatewayUnavailableError("the gateway container vanished on restart");
  return answering(row, now);
}

/** Recreates the container from the same volume, then re-applies the platform's config. */
async function repair(row: InstanceRow): Promise<ActionResult> {
  const run = await startRun(row.id, "repair");
  const info = await ensureContainer(await wantRunning(row), { recreate: true });
  await run.step("container-created");
  await waitHealthy(info);
  await run.step("gateway-healthy");
  const fresh = (await getInstance(row.id)) as InstanceRow;
  await reapplyConfig(fresh, gatewayAddress(info) as string);
  await run.step("paired");
  await observe(fresh);
  await run.step("ready");
  return { ok: true, message: "Instance repaired: container recreated, configuration re-applied" };
}

const actions: Record<InstanceAction, (row: InstanceRow) => Promise<ActionResult>> = {
  start,
  stop,
  restart,
  repair,
  "reset-memory": resetMemory,
};

/** Runs one lifecycle action; throws when the engine or gateway fails (the job classes it). */
export async function runAction(row: InstanceRow, action: InstanceAction): Promise<ActionResult> {
  try {
    return await actions[action](row);
  } catch (error) {
    // A start-up cut short ends its progress run as failed (decision 0158).
    if (action === "start" || action === "restart" || action === "repair") await failRun(row.id);
    throw error;
  }
}
