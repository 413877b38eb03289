import { usersWaitingOn } from "../../app/server/agents/boot-queue.server.ts";
import { getInstance, updateInstance } from "../../app/server/agents/instances.server.ts";
import { failRun } from "../../app/server/agents/progress.server.ts";
import {
  joinRestartLine,
  leaveRestartLine,
  markRestartBackInLine,
  markRestartNode,
  markRestartStarted,
  takeRestartTurn,
} from "../../app/server/agents/restart-queue.server.ts";
import { sendJob } from "../../app/server/platform/jobs.server.ts";
import { queueAgentSync } from "./agents-sync.ts";
import { ensureContainer } from "./container.ts";
import { log, rt } from "./engine.ts";
import { gatewayNodeOf } from "./gateway-node.ts";
import { waitHealthy } from "./health.ts";
import { tryInstanceLock } from "./lock.ts";
import { BUSY, withNodeSlot } from "./node-slots.ts";
import { observe } from "./observe.ts";
import { run, startRun } from "./run-progress.ts";
import { queueWarmUp } from "./warm-up.ts";

// Reconcile's restart of a gateway that went down (decision 0240). Twenty gateways booting at
// once after the engine came back took minutes each on two cores, their health waits ran out
// and they were restarted again and again (the soak, 0238). So reconcile's pass only records
// the instance `starting` and queues a restart-instance job; the job waits its turn (first
// queued, first restarted) for one of its node's slots, the ones wakes take (node-slots.ts), and
// holds it from the container's start until the gateway is healthy or its bound has passed.

/**
 * How often the first waiting restart of a node looks for a free slot. A boot takes tens of
 * seconds, so this costs it little; it lets the boots users wait for go first anyway (0241).
 */
const POLL_MS = 250;
/** How often a restart behind others looks at its place (twenty of them poll the database). */
const BEHIND_POLL_MS = 1_000;

/** Reconcile's pass: the restart run begins, the instance is `starting`, its job queued. */
export async function queueRestart(instanceId: string): Promise<void> {
  await startRun(instanceId, "restart");
  await joinRestartLine(instanceId);
  await updateInstance(instanceId, {
    observed_state: "starting",
    health: "unknown",
    observed_at: new Date(),
  });
  await sendJob("restart-instance", { instanceId });
}

/**
 * Runs `boot` once the restart's turn has come and one of its node's slots is free, holding the
 * slot while it runs. A restart no longer wanted (the instance stopped, deleted or put to sleep
 * meanwhile) takes no slot and runs nothing: undefined. It lets a boot a user waits for (a
 * start, restart, repair, provision or wake on its node) go first (decision 0241). `signal` (the
 * job's) ends a wait whose job was given up.
 */
export async function withBootSlot<T>(
  instanceId: string,
  boot: () => Promise<T | typeof BUSY>,
  signal?: AbortSignal,
): Promise<T | undefined> {
  // A retry of a job whose worker died waits in its old place.
  await markRestartBackInLine(instanceId);
  const node = await gatewayNodeOf(instanceId);
  await markRestartNode(instanceId, node);
  const booted = await withNodeSlot(
    node,
    {
      place: async () => {
        const turn = await takeRestartTurn(instanceId);
        if (!turn.wanted) return undefined;
        if (turn.ahead > 0) return turn.ahead;
        return (await usersWaitingOn(node)) > 0 ? 1 : 0;
      },
      pollMs: (ahead) => (ahead <= 1 ? POLL_MS : BEHIND_POLL_MS),
      started: () => markRestartStarted(instanceId),
    },
    boot,
    signal,
  );
  return booted.ran ? booted.value : undefined;
}

export type RestartOutcome =
  | { restarted: true; healthyMs?: number; unhealthy?: string }
  | { restarted: false; reason: string };

/**
 * The boot itself, in the slot: the container started under the instance's lock (taken with a
 * try, node-slots.ts's lock order: held, BUSY, the slot goes back and the restart steps aside),
 * only if the instance still wants it; then its /healthz awaited without the lock, so a user's
 * stop is never kept waiting (the wait then ends at once). A container found running (an
 * earlier attempt of this job started it, or a user's start) is awaited the same way: it boots
 * on the same CPU. A gateway not healthy within its bound frees the slot; reconcile's observation
 * and crash backoff take it from there.
 */
async function boot(instanceId: string): Promise<RestartOutcome | typeof BUSY> {
  const started = await tryInstanceLock(instanceId, async () => {
    const row = await getInstance(instanceId);
    if (!row?.container_id || row.desired_state !== "running") return "not meant to run";
    if (row.observed_state === "sleeping") return "asleep";
    const info = await rt().inspect(row.container_name);
    if (info?.running) return info;
    const created = await ensureContainer(row);
    await run(instanceId, "restart").step("container-created");
    return created;
  });
  if (started === undefined) return BUSY; // another operation acts on it: the slot goes back
  if (typeof started === "string") return { restarted: false, reason: started };
  try {
    const healthyMs = await waitHealthy(started);
    // Running (and its run ended) now, not at the sampler's next pass.
    const row = await getInstance(instanceId);
    if (row) await observe(row);
    return { restarted: true, healthyMs };
  } catch (error) {
    log().warn({ err: error, instanceId }, "a restarted gateway is not healthy within its bound");
    return { restarted: true, unhealthy: (error as Error).message };
  }
}

/** The restart-instance job: idempotent (a restart that is not wanted any more does nothing). */
export async function restartById(
  instanceId: string,
  signal?: AbortSignal,
): Promise<RestartOutcome> {
  const outcome = (await withBootSlot(instanceId, () => boot(instanceId), signal)) ?? {
    restarted: false,
    reason: "not wanted any more",
  };
  await leaveRestartLine(instanceId);
  if (!outcome.restarted) {
    // The restart run reconcile began ends here (stopped, deleted or asleep meanwhile).
    await failRun(instanceId);
    return outcome;
  }
  // After the boot, outside the slot, as after any boot: the dry run and the agents re-applied.
  await queueWarmUp(instanceId);
  await queueAgentSync(instanceId);
  return outcome;
}
