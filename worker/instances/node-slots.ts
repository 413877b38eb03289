import os from "node:os";
import { setTimeout as delay } from "node:timers/promises";
import { lockDb } from "../../app/server/platform/db.server.ts";
import { env } from "../../app/server/platform/env.server.ts";

// The per-node boot slots (decisions 0221, 0240, 0241). A gateway that boots or thaws costs one
// core (its CPU cap is 1), so every boot (a wake, a restart by reconcile, a user's start,
// restart or repair, a provision, a pool fill) takes one of WAKE_CONCURRENCY slots of the
// gateway's node for as long as it comes up: more at once than cores only stretches every one of
// them. A slot is a session advisory lock on a reserved connection: a worker that dies frees its
// slot with its connection. Each kind of boot waits in a line of its own (withNodeSlot).

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

/**
 * A boot that found its instance's lock held: it gives its slot back and steps aside (marked
 * started, it holds nobody back) until it finds the lock free with a slot.
 */
export const BUSY = Symbol("the instance's lock is held");

/** A boot's line: where it stands, and how it marks leaving and rejoining it. */
export interface SlotLine {
  /**
   * Boots on the node that go before this one and still wait (0: its turn, once a slot is
   * free); undefined when there is nothing to boot any more (the waiter runs nothing).
   */
  place(): Promise<number | undefined>;
  /** How long to wait before the next look, by place. */
  pollMs(ahead: number): number;
  /** It took a slot (it has left the line). */
  started?(): Promise<void>;
  /** Its boot threw (the slot is given back; its job's retry, if any, waits again). */
  failed?(): Promise<void>;
}

export type SlotOutcome<T> = { ran: true; value: T } | { ran: false };

/**
 * Runs `boot` once the line says it is its turn and one of the node's slots is free, holding the
 * slot while it runs. Lock order: a slot holder never waits for an instance's lock (a provision
 * holds its lock while it waits for a slot), so `boot` takes it with a try and answers BUSY when
 * it is held: the slot goes back, and the boot steps aside for the boots behind it (an operation
 * on its instance, a backup say, never holds up its node's line) and tries again. `signal` (the
 * job's) ends a wait whose job was given up.
 */
export async function withNodeSlot<T>(
  node: string,
  line: SlotLine,
  boot: () => Promise<T | typeof BUSY>,
  signal?: AbortSignal,
): Promise<SlotOutcome<T>> {
  for (;;) {
    signal?.throwIfAborted();
    const ahead = await line.place();
    if (ahead === undefined) return { ran: false };
    const release = ahead === 0 ? await tryTakeNodeSlot(node) : undefined;
    if (release) {
      let value: T | typeof BUSY;
      try {
        await line.started?.();
        value = await boot();
      } catch (error) {
        await line.failed?.();
        throw error;
      } finally {
        await release();
      }
      if (value !== BUSY) return { ran: true, value };
    }
    await delay(line.pollMs(ahead));
  }
}
