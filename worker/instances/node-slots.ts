import os from "node:os";
import { lockDb } from "../../app/server/platform/db.server.ts";
import { env } from "../../app/server/platform/env.server.ts";

// The per-node boot slots (decisions 0221, 0240). A gateway that boots or thaws costs one core
// (its CPU cap is 1), so a wake and a restart by reconcile each take one of WAKE_CONCURRENCY
// slots of the gateway's node for as long as it comes up: more at once than cores only
// stretches every one of them. A slot is a session advisory lock on a reserved connection: a
// worker that dies frees its slot with its connection.

/** Slot holders this worker process may run at once, over all nodes (see wakeConcurrency). */
function processRoom(): number {
  return Math.max(1, Math.floor((env().DATABASE_LOCK_POOL_MAX - 2) / 2));
}

/**
 * A node's slots: WAKE_CONCURRENCY, else the worker's core count; at most what the lock pool
 * leaves room for. A running wake holds two of its connections (its slot and the instance's
 * lock; its queries go to the query pool): more holders in one worker than
 * (DATABASE_LOCK_POOL_MAX − 2) / 2 would leave other operations no lock to take.
 */
export function wakeConcurrency(): number {
  const wanted = env().WAKE_CONCURRENCY ?? os.availableParallelism();
  return Math.max(1, Math.min(wanted, processRoom()));
}

/** Slots this process holds now (over every node): kept under processRoom(). */
let runningHere = 0;

/**
 * One of the node's slots taken on its own connection (its release returned), or undefined
 * when all are taken. Wakes and restarts share the names, so they share the count.
 */
export async function tryTakeNodeSlot(node: string): Promise<(() => Promise<void>) | undefined> {
  if (runningHere >= processRoom()) return undefined;
  const slots = wakeConcurrency();
  const conn = await lockDb().reserve();
  try {
    for (let slot = 0; slot < slots; slot++) {
      // The single-host name is kept as it was (a worker of the previous build shares it).
      const name = node === "host" ? `wake-slot:${slot}` : `wake-slot:${node}:${slot}`;
      const [got] = await conn<{ ok: boolean }[]>`
        select pg_try_advisory_lock(hashtext(${name})) as ok`;
      if (got?.ok) {
        runningHere += 1;
        return async () => {
          runningHere -= 1;
          try {
            await conn`select pg_advisory_unlock(hashtext(${name}))`;
          } finally {
            conn.release();
          }
        };
      }
    }
  } catch (error) {
    conn.release();
    throw error;
  }
  conn.release();
  return undefined;
}
