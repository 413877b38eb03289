import { setTimeout as delay } from "node:timers/promises";
import { userBootPending } from "../../app/server/agents/boot-queue.server.ts";
import {
  getInstance,
  type InstancePatch,
  type InstanceRow,
  listInstances,
  recordError,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { leaveRestartLine, restartJobLive } from "../../app/server/agents/restart-queue.server.ts";
import { RESTART_UNDER_WAY, recordReconcilePass } from "../metrics.ts";
import { type ContainerInfo, LABELS, RuntimeUnavailableError } from "../runtime/index.ts";
import { alignRestartPolicy } from "./container.ts";
import { deploymentLabels, ensureNetwork, gatewayAddress, isUp, log, rt } from "./engine.ts";
import { stoppedWithEngine } from "./engine-watch.ts";
import { PLATFORM_CONFIG_VERSION, reapplyConfig } from "./gateway-config.ts";
import {
  attachPlatformToGatewayNetworks,
  isolateGateway,
  removeOrphanNetworks,
} from "./gateway-networks.ts";
import { hungBoot } from "./hung-boot.ts";
import { removeDeadJobLeftovers, removeInstanceLeftovers } from "./leftovers.ts";
import { tryInstanceLock } from "./lock.ts";
import { recordClusterNodes } from "./nodes.ts";
import { observe } from "./observe.ts";
import { pooledContainerNames } from "./pool.ts";
import { discardDeadFills } from "./pool-dead-fills.ts";
import { settleStaleVolumes } from "./recover.ts";
import { queueRestart } from "./restart-line.ts";
import { recoverInterruptedRestores } from "./restore-recovery.ts";
import { measureStorageWhenDue } from "./storage.ts";
import { retryVolumeRemovals } from "./volume-removals.ts";

// reconcile: desired vs observed state of every instance. A container that should run and
// does not is recorded (crash, OOM kill, gone) and restarted with exponential backoff;
// containers of this deployment that belong to no instance or pooled gateway are removed.
// A restart is queued, not run, by the pass: its job waits for one of the node's boot slots,
// the ones wakes take (decision 0240), so after the engine's restart the gateways come back a
// few at a time, in order, instead of all of them thrashing on the CPU at once.

const BACKOFF_BASE_MS = 10_000;
const BACKOFF_MAX_MS = 10 * 60_000;
/** How long after an exit by SIGKILL the engine may still flag it as an OOM kill. */
const OOM_FLAG_WAIT_MS = 2_000;

/**
 * The container as it ended. Docker records an exit and its OOM kill as two events, so a
 * container that just died by SIGKILL (137) may not carry the OOM flag yet; it is read again
 * until the flag comes or OOM_FLAG_WAIT_MS after its end (a restart now would clear the flag,
 * and the kill would be recorded as a plain exit).
 */
async function settledExit(
  name: string,
  info: ContainerInfo | undefined,
): Promise<ContainerInfo | undefined> {
  if (!info || info.running || info.oomKilled || info.exitCode !== 137 || !info.finishedAt) {
    return info;
  }
  const ended = new Date(info.finishedAt).getTime();
  // Bounded by this process's clock too: an engine's clock may be ahead of ours.
  const deadline = Math.min(ended + OOM_FLAG_WAIT_MS, Date.now() + OOM_FLAG_WAIT_MS);
  let seen = info;
  while (Date.now() < deadline) {
    await delay(100);
    const again = await rt().inspect(name);
    if (!again || again.running || again.oomKilled || again.finishedAt !== seen.finishedAt) {
      return again;
    }
    seen = again;
  }
  return seen;
}

/** Why a container that should run does not, as a row patch (each exit counted once). */
function downPatch(row: InstanceRow, info: ContainerInfo | undefined): InstancePatch {
  const patch: InstancePatch = { observed_at: new Date(), health: "unknown" };
  if (!info) {
    patch.observed_state = "missing";
    patch.last_error = "container missing";
    return patch;
  }
  patch.observed_state = info.oomKilled ? "oom_killed" : "crashed";
  const finished = info.finishedAt ? new Date(info.finishedAt) : new Date();
  // A later pass sees the same finishedAt: record it once.
  if (row.last_error_at && row.last_error_at >= finished) return patch;
  patch.last_error_at = new Date();
  if (info.oomKilled) {
    patch.oom_kills = row.oom_kills + 1;
    patch.last_error = `out of memory: the gateway was killed at its ${Math.round(info.limits.memoryBytes / 1024 ** 2)} MiB limit (OOMKilled)`;
  } else {
    patch.last_error = `gateway exited with code ${info.exitCode}`;
  }
  return patch;
}

/**
 * Records why the gateway is down, then queues its restart (restart-line.ts) unless its backoff
 * is still running. The pass never waits for the boot: the restart waits its turn for a boot
 * slot in its own job (decision 0240).
 */
async function heal(row: InstanceRow, info: ContainerInfo | undefined): Promise<string> {
  // Queued already (waiting for a slot, or booting): its down state was recorded then.
  if (await restartJobLive(row.id)) return RESTART_UNDER_WAY;
  // A user's start, restart or repair (or a provision) waits for its slot: it boots it (0241).
  if (await userBootPending(row.id)) return "a user's boot under way";
  // Stopped by the engine's shutdown: no crash of the gateway's (no error, backoff or count),
  // and `starting` while it comes back, not `error`.
  if (await stoppedWithEngine(info)) {
    await queueRestart(row.id);
    return "stopped with the engine, restart queued";
  }
  const patch = downPatch(row, info);
  const now = Date.now();
  if (row.next_restart_at && row.next_restart_at.getTime() > now) {
    // Not queued (its job gave up): not `starting` either until it is queued again.
    await leaveRestartLine(row.id);
    await updateInstance(row.id, patch);
    return `${patch.observed_state}, restart due ${row.next_restart_at.toISOString()}`;
  }
  await updateInstance(row.id, { ...patch, ...backoff(row, now) });
  // A restart like a user's: its progress shows, and the observation that sees the gateway
  // healthy again ends it (finishBootRun).
  await queueRestart(row.id);
  return `${patch.observed_state}, restart queued`;
}

/** The crash backoff's next step: one more restart counted, the one after it not before. */
function backoff(row: InstanceRow, now: number): InstancePatch {
  const delay = Math.min(BACKOFF_BASE_MS * 2 ** row.crash_restarts, BACKOFF_MAX_MS);
  return { crash_restarts: row.crash_restarts + 1, next_restart_at: new Date(now + delay) };
}

/**
 * A hung boot (hung-boot.ts, decision 0253) is stopped and queued for a restart like a crashed
 * gateway: recorded, counted in the crash backoff, and left running while that backoff runs.
 */
async function restartHungBoot(row: InstanceRow, info: ContainerInfo, why: string) {
  // A restart already queued, or a user's boot waiting for its slot, boots it anew itself.
  if (await restartJobLive(row.id)) return RESTART_UNDER_WAY;
  if (await userBootPending(row.id)) return "a user's boot under way";
  const now = Date.now();
  if (row.next_restart_at && row.next_restart_at.getTime() > now) {
    return `boot hung, restart due ${row.next_restart_at.toISOString()}`;
  }
  log().warn({ instanceId: row.id, why }, "a gateway's boot hung: restarting it");
  await rt().stop(info.id, 10);
  await updateInstance(row.id, {
    last_error: `${why}: restarted`,
    last_error_at: new Date(now),
    ...backoff(row, now),
  });
  await queueRestart(row.id);
  return "boot hung, restart queued";
}

/** One instance towards its desired state; returns what was seen or done. */
export async function reconcileOne(row: InstanceRow): Promise<string> {
  if (!row.container_id) return "not provisioned";
  // Under the instance's lock: a one-shot of this instance is a dead job's leftover.
  await removeInstanceLeftovers(row.id);
  let info = await rt().inspect(row.container_name);
  if (info && (await isolateGateway(info, row.id))) info = await rt().inspect(row.container_name);
  // A gateway made with `on-failure` before decision 0241: the engine restarts it no more.
  if (info)
    await alignRestartPolicy(info).catch((error) =>
      log().warn({ err: error }, "restart policy not changed"),
    );
  if (row.desired_state === "stopped") {
    if (isUp(info)) await rt().stop(info.id, 10);
    await observe(row);
    return isUp(info) ? "stopped" : "ok";
  }
  // A sleeping gateway is down on purpose; a message wakes it (worker/instances/wake.ts).
  if (row.observed_state === "sleeping" && !info?.running) return "sleeping";
  // Paused but not asleep: a backup's pause whose worker died before the release (decision
  // 0180; a backup holds this lock, so none is under way). A start unpauses it.
  if (info?.state === "paused") {
    await rt().start(info.id);
    await observe(row);
    return "resumed after an unfinished backup copy";
  }
  if (!info?.running) {
    info = await settledExit(row.container_name, info);
    // Running again meanwhile (the engine's restart policy): observed as any running gateway.
    if (!info?.running) return heal(row, info);
  }
  const seen = await observe(row);
  const hung = info.running ? await hungBoot(seen, info) : undefined;
  if (hung) return restartHungBoot(seen, info, hung);
  if (seen.health === "healthy" && row.crash_restarts > 0) {
    await updateInstance(row.id, { crash_restarts: 0, next_restart_at: null });
  }
  // A gateway made by an older platform gets the platform's current config part (once).
  const address = gatewayAddress(info);
  if (
    seen.health === "healthy" &&
    row.paired_at &&
    address &&
    (row.platform_config_version ?? 0) < PLATFORM_CONFIG_VERSION
  ) {
    await reapplyConfig(row, address);
    return "ok, platform config brought up to date";
  }
  return "ok";
}

/** The container names instances and pooled gateways own. */
async function knownContainerNames(rows: InstanceRow[]): Promise<Set<string>> {
  return new Set([...rows.map((r) => r.container_name), ...(await pooledContainerNames())]);
}

/** Removes this deployment's gateway containers that no instance or pooled gateway owns. */
async function removeOrphans(rows: InstanceRow[]): Promise<string[]> {
  const byId = new Set(rows.map((r) => r.id));
  const known = await knownContainerNames(rows);
  const orphans: string[] = [];
  for (const c of await rt().list({
    [LABELS.managed]: "1",
    [LABELS.role]: "gateway",
    ...deploymentLabels(),
  })) {
    const instanceId = c.labels[LABELS.instanceId];
    if ((instanceId && byId.has(instanceId)) || known.has(c.name)) continue;
    await rt().remove(c.id);
    orphans.push(c.name);
  }
  if (orphans.length) log().warn({ orphans }, "reconcile removed orphan containers");
  return orphans;
}

/** reconcileOne under the instance's lock; "busy" when another operation holds it. */
export async function reconcileLocked(row: InstanceRow): Promise<string> {
  try {
    const outcome = await tryInstanceLock(row.id, async () => {
      const fresh = await getInstance(row.id);
      return fresh ? reconcileOne(fresh) : "gone";
    });
    return outcome ?? "busy";
  } catch (error) {
    // One instance's failure never stops the others. The engine not answering is recorded by
    // its check (engine-watch.ts), which marks every instance `unknown`, not as this one's error.
    if (error instanceof RuntimeUnavailableError) return `unavailable: ${error.message}`;
    await recordError(row.id, `reconcile: ${(error as Error).message}`);
    return `error: ${(error as Error).message}`;
  }
}

/** Runs one step of the pass; a failure is logged and reported, never the end of the pass. */
async function step<T>(what: string, fn: () => Promise<T>, fallback: T): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    log().warn({ err: error }, `reconcile: ${what} failed`);
    return fallback;
  }
}

export async function reconcileAll() {
  const rows = await listInstances();
  // The network (and, on a laptop, the relay to a web on loopback) after a worker restart.
  if (rows.length) await step("ensuring the gateways' network", ensureNetwork, undefined);
  const orphans = await step("removing orphans", () => removeOrphans(rows), []);
  const networks = await step(
    "removing orphan networks",
    async () => removeOrphanNetworks(await knownContainerNames(rows)),
    [],
  );
  const platformJoined = await step(
    "joining platform containers to gateway networks",
    attachPlatformToGatewayNetworks,
    0,
  );
  const leftovers = await step("removing dead jobs' one-shots", removeDeadJobLeftovers, []);
  const deadFills = await step("discarding dead fills' pooled gateways", discardDeadFills, []);
  // Before the instances: an interrupted restore's instance goes back to its old volume.
  const restores = await step("recovering interrupted restores", recoverInterruptedRestores, []);
  const results: Record<string, string> = {};
  for (const row of rows) results[row.id] = await reconcileLocked(row);
  const storageMeasured = await step("measuring storage", () => measureStorageWhenDue(rows), 0);
  await step("recording the nodes", recordClusterNodes, undefined);
  const staleVolumes = await step("settling stale volumes", settleStaleVolumes, []);
  const deferred = await step("removing deferred volumes", retryVolumeRemovals, []);
  recordReconcilePass(
    Object.values(results),
    orphans.length +
      networks.length +
      leftovers.length +
      deadFills.length +
      restores.length +
      staleVolumes.length +
      deferred.length,
  );
  return {
    instances: results,
    orphansRemoved: orphans,
    networksRemoved: networks,
    platformJoined,
    leftoversRemoved: leftovers,
    deadFillsDiscarded: deadFills,
    restoresRecovered: restores,
    storageMeasured,
    staleVolumesSettled: staleVolumes.length,
    deferredVolumesRemoved: deferred,
  };
}
