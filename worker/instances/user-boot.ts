import {
  bootPlace,
  joinBootLine,
  leaveBootLine,
  markBootStarted,
} from "../../app/server/agents/boot-queue.server.ts";
import { gatewayNodeOf } from "./gateway-node.ts";
import { type BUSY, withNodeSlot } from "./node-slots.ts";

// The boots a user waits for (decision 0241): a lifecycle start, restart or repair, and a
// provision's cold start. Each takes one of its node's boot slots (node-slots.ts), first asked
// first booted (app/server/agents/boot-queue.server.ts), ahead of reconcile's restarts and pool
// fills; a boot this slow on a starved CPU failed and was booted again at once (the soak, 0238).

/** How often a waiting boot looks at the line, as a wake does: a user waits for it. */
const POLL_MS = 100;

export interface UserBootOptions {
  /** The job's signal: it ends a wait whose job was given up. */
  signal?: AbortSignal;
  /**
   * Runs once the boot has its place, before it waits (an action records its desired state):
   * from then on reconcile sees the boot pending and leaves the gateway to it.
   */
  before?: () => Promise<unknown>;
}

/**
 * Runs `boot` (from the container's start until /healthz answers or its bound passes) in one of
 * the instance's node's slots once no user boot asked for earlier there still waits. `boot`
 * answers BUSY when it found the instance's lock held: the slot goes back and the boot steps
 * aside until the lock is free.
 */
export async function withUserBootSlot<T>(
  instanceId: string,
  boot: () => Promise<T | typeof BUSY>,
  options: UserBootOptions = {},
): Promise<T> {
  const node = await gatewayNodeOf(instanceId);
  await joinBootLine(instanceId, node);
  try {
    await options.before?.();
    const booted = await withNodeSlot(
      node,
      {
        place: () => bootPlace(instanceId),
        pollMs: () => POLL_MS,
        started: () => markBootStarted(instanceId),
      },
      boot,
      options.signal,
    );
    // bootPlace always answers a place: a user's boot is never "nothing to do".
    if (!booted.ran) throw new Error("a user's boot left its line without booting");
    return booted.value;
  } finally {
    await leaveBootLine(instanceId);
  }
}
