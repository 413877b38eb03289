import { getInstance } from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { sendJob } from "../../app/server/platform/jobs.server.ts";
import {
  type ClusterRuntime,
  type ContainerInfo,
  isClusterRuntime,
  LABELS,
  limitsForPlan,
  type ResourceLimits,
} from "../runtime/index.ts";
import { log, rt } from "./engine.ts";
import { gatewayOwner } from "./gateway-owner.ts";
import { waitHealthy } from "./health.ts";
import { withInstanceLock } from "./lock.ts";
import { observe } from "./observe.ts";
import { discardPooled } from "./pool.ts";

// Draining a node: it takes no new instance, and its instances move to other nodes one at a
// time with their state: stop, copy the state volume to the node placement chooses, pin the
// instance there, start it, verify it healthy, and only then remove the source copy. A move that
// fails puts the instance back where it was (started again if it was running) and stops the
// drain; the node stays closed to new instances. docs/decisions/0167-draining-nodes.md

export interface MoveResult {
  instanceId: string;
  containerId: string;
  from: string;
  to?: string;
  ok: boolean;
  /** When the move began (epoch ms) and how long it took. */
  at: number;
  ms: number;
  error?: string;
}

export interface DrainReport {
  nodeId: string;
  moved: MoveResult[];
  /** True when every instance moved and the node was retired from scheduling. */
  done: boolean;
}

export function clusterRuntime(): ClusterRuntime {
  const runtime = rt();
  if (!isClusterRuntime(runtime)) {
    throw new Error(`the ${runtime.driver} driver runs on one node: there is nothing to drain`);
  }
  return runtime;
}

/**
 * Healthy on its node: the engine's own health check when the image has one (it runs inside the
 * task's container wherever the node is), else the gateway's /healthz over the network.
 */
export async function verifyHealthy(id: string, timeoutMs: number): Promise<ContainerInfo> {
  const started = Date.now();
  for (;;) {
    const info = await rt().inspect(id);
    if (info?.running && info.health === "healthy") return info;
    if (info?.running && info.health === undefined) {
      await waitHealthy(info, Math.max(1_000, timeoutMs - (Date.now() - started)));
      return info;
    }
    if (info?.health === "unhealthy") throw new Error("the gateway's health check fails");
    if (Date.now() - started > timeoutMs) {
      throw new Error(`not healthy within ${timeoutMs} ms (${info?.state ?? "gone"})`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

function limitsOf(info: ContainerInfo): ResourceLimits {
  const base = limitsForPlan(undefined);
  return {
    ...base,
    memoryBytes: info.limits.memoryBytes || base.memoryBytes,
    cpus: info.limits.nanoCpus ? info.limits.nanoCpus / 1e9 : base.cpus,
    pidsLimit: info.limits.pidsLimit || base.pidsLimit,
  };
}

/** Moves one instance's container and state off `from` (the caller made `from` unschedulable). */
export async function moveInstance(
  cluster: ClusterRuntime,
  containerId: string,
  from: string,
  timeoutMs = env().GATEWAY_HEALTH_TIMEOUT_MS,
): Promise<MoveResult> {
  const t0 = Date.now();
  const info = await cluster.inspect(containerId);
  const instanceId = info?.labels[LABELS.instanceId] ?? "";
  const result: MoveResult = { instanceId, containerId, from, ok: false, at: t0, ms: 0 };
  if (!info) return { ...result, error: "the instance's container is gone" };
  const volume = info.mounts.find((m) => m.type === "volume")?.name;
  if (!volume) return { ...result, error: "the instance has no state volume" };
  const wasRunning = info.running || info.state === "restarting";
  const image = info.imageId || info.image;
  let to: string | undefined;
  try {
    to = (await cluster.place(limitsOf(info))).id;
    result.to = to;
    // A consistent copy needs the gateway stopped.
    if (wasRunning) await cluster.stop(containerId);
    await cluster.copyVolume(volume, image, to);
    await cluster.pin(containerId, to);
    if (wasRunning) {
      await cluster.start(containerId);
      await verifyHealthy(containerId, timeoutMs);
    }
    await cluster.removeVolumeOn(volume, from);
    return { ...result, ok: true, ms: Date.now() - t0 };
  } catch (error) {
    const why = (error as Error).message;
    log().warn({ instanceId, from, to, err: error }, "moving an instance failed; putting it back");
    try {
      await cluster.stop(containerId).catch(() => {});
      await cluster.pin(containerId, from);
      if (to) await cluster.removeVolumeOn(volume, to);
      if (wasRunning) await cluster.start(containerId);
    } catch (again) {
      log().error({ instanceId, err: again }, "the instance did not go back to its node");
    }
    return { ...result, ms: Date.now() - t0, error: why };
  }
}

/**
 * A moved gateway runs as a new task with a new address: the row says so at once, not at the
 * next reconcile (the web reaches a gateway at the row's address: a chat in between would get
 * a 502). A failure here leaves it to that reconcile.
 */
async function observeMoved(instanceId: string): Promise<void> {
  const row = await getInstance(instanceId);
  if (!row) return;
  await observe(row).catch((error: unknown) =>
    log().warn({ instanceId, err: error }, "moved instance not observed; reconcile will"),
  );
}

/** Drains a node: closes it to new instances, then moves its instances one at a time. */
export async function drainNode(
  nodeId: string,
  options: { timeoutMs?: number } = {},
): Promise<DrainReport> {
  const cluster = clusterRuntime();
  const node = (await cluster.nodes()).find((n) => n.id === nodeId);
  if (!node) throw new Error(`no such node: ${nodeId}`);
  await cluster.setDraining(nodeId, true);
  const moved: MoveResult[] = [];
  let pooled = 0;
  for (const { id, instanceId: labelled } of node.instances) {
    let owner = await gatewayOwner({ labelled, containerId: id });
    if (owner.kind === "pool") {
      // It carries nothing: discarded, not moved (the next fill starts one elsewhere). Its row
      // goes first, so no provisioning claims it meanwhile.
      const [claimed] =
        await db()`delete from gateway_pool where id = ${owner.poolId} returning id`;
      if (claimed) {
        await discardPooled(owner.poolId, owner.containerName);
        pooled++;
        continue;
      }
      owner = await gatewayOwner({ labelled, containerId: id }); // adopted meanwhile
    }
    const instanceId = owner.kind === "pool" ? labelled : owner.instanceId;
    const move = async () => {
      const result = await moveInstance(cluster, id, nodeId, options.timeoutMs);
      if (result.ok && instanceId) await observeMoved(instanceId);
      return { ...result, instanceId: instanceId || result.instanceId };
    };
    const result = instanceId ? await withInstanceLock(instanceId, move) : await move();
    moved.push(result);
    if (!result.ok) return { nodeId, moved, done: false };
  }
  // The discarded pooled gateways are replaced on the nodes that remain.
  if (pooled > 0) await sendJob("fill-pool", {}).catch(() => {});
  await cluster.retireNode(nodeId);
  return { nodeId, moved, done: true };
}

export interface LostInstance {
  nodeId: string;
  /** The node's state as the scheduler sees it (down, unknown, disconnected). */
  state: string;
  id: string;
  instanceId: string;
}

/**
 * Instances pinned to a node that is not ready: their state volume is out of reach until the
 * node comes back (decision 0167 says what happens to them).
 */
export async function lostInstances(): Promise<LostInstance[]> {
  const runtime = rt();
  if (!isClusterRuntime(runtime)) return [];
  const lost: LostInstance[] = [];
  for (const n of await runtime.nodes()) {
    if (n.state === "ready") continue;
    for (const i of n.instances) {
      // A pooled gateway is nobody's (the next fill discards it); an adopted one is its tenant's.
      const owner = await gatewayOwner({ labelled: i.instanceId, containerId: i.id });
      if (owner.kind === "pool") continue;
      lost.push({ nodeId: n.id, state: n.state, id: i.id, instanceId: owner.instanceId });
    }
  }
  return lost;
}
