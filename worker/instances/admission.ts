import type { InstanceRow } from "../../app/server/agents/instances.server.ts";
import { provisionQueuePlace } from "../../app/server/agents/provision-queue.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { isClusterRuntime, limitsForPlan, NoCapacityError } from "../runtime/index.ts";
import { rt } from "./engine.ts";
import { DEFAULT_NEED_BYTES, fits } from "./memory-pressure.ts";

// Admission of a provision that starts a new gateway (decision 0231): it waits its turn in the
// line of provisions (app/server/agents/provision-queue.server.ts) and starts only when the
// gateway fits, rather than start one the host has no memory for and let the kernel's OOM killer
// pick a victim among the neighbours. A provision that adopts a pooled gateway needs no room
// (that gateway runs already) and never comes here.

/**
 * How often a waiting provision looks at the line and the room. A boot takes tens of seconds, so
 * a second is no cost to it; on Swarm each look lists the nodes, services and tasks.
 */
const POLL_MS = 1_000;

export class NoRoomToStartError extends Error {}

/**
 * Room for one more gateway of this plan. One engine host: its memory as the wakes read it
 * (memory-pressure.ts), the gateway taken at what one needs awake (1 GiB) or its plan's limit
 * if lower. Swarm: a node whose unreserved memory and CPUs take the plan's reservation (the
 * placement the driver would make; the worker cannot read another node's /proc/meminfo).
 */
export async function roomToStart(plan: string | null): Promise<boolean> {
  const limits = limitsForPlan(plan);
  const runtime = rt();
  if (isClusterRuntime(runtime)) {
    try {
      await runtime.place(limits);
      return true;
    } catch (error) {
      if (error instanceof NoCapacityError) return false;
      throw error;
    }
  }
  return fits(Math.min(limits.memoryBytes || DEFAULT_NEED_BYTES, DEFAULT_NEED_BYTES));
}

/**
 * Waits until the provision is at the head of the line and its gateway fits; after
 * PROVISION_ROOM_WAIT_MS it fails with NoRoomToStartError (its job's retry keeps its place in
 * line: a retried job keeps the order it was asked in). `signal` (the job's) ends a wait whose
 * job was given up.
 */
export async function waitForRoomToStart(row: InstanceRow, signal?: AbortSignal): Promise<void> {
  const since = Date.now();
  for (;;) {
    signal?.throwIfAborted();
    const place = await provisionQueuePlace(row.id);
    // No place (its job is not live: a direct call) counts as the head of the line.
    if ((place?.ahead ?? 0) === 0 && (await roomToStart(row.plan))) return;
    if (Date.now() - since > env().PROVISION_ROOM_WAIT_MS) {
      throw new NoRoomToStartError("the host has no memory free to start the agent's gateway");
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}
