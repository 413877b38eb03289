import {
  markWakeBackInLine,
  markWakeNode,
  markWakeStarted,
  takeWakeTurn,
} from "../../app/server/agents/wake-queue.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { gatewayNodeOf } from "./gateway-node.ts";
import { DEFAULT_NEED_BYTES, fits } from "./memory-pressure.ts";
import { withNodeSlot } from "./node-slots.ts";

// A cap on concurrent wakes (decision 0221). Ten wakes at once on two cores each take several
// times as long as one (a thawed gateway's first turn is CPU-bound paging-in), so a wake takes
// one of WAKE_CONCURRENCY slots of its node and the others on that node wait their turn in order
// of request (app/server/agents/wake-queue.server.ts). Slots are per node: on a Swarm each node
// wakes its own gateways on its own CPU, and a wake on a node with a free slot does not wait
// behind another node's line. The slots (node-slots.ts) are shared with reconcile's restarts of
// gateways that went down (restart-line.ts, decision 0240): each line's first competes for them.

/** How often a waiting wake looks at the queue (a slot handed on costs at most this). */
const POLL_MS = 100;

export class NoRoomToWakeError extends Error {}

/**
 * Admission (decision 0222): the wake at the head of the line starts only when the gateway's
 * memory awake (its last sample before it slept) fits on the host. Until then it keeps its place
 * (the sleep pass frees memory meanwhile: warm pool first, then the coldest idle agents); after
 * WAKE_ROOM_WAIT_MS it fails rather than push a neighbour into the OOM killer.
 */
async function roomToWake(instanceId: string, waiting: { since: number | undefined }) {
  const [row] = await db()<{ memory_bytes: number | null }[]>`
    select memory_bytes from instances where id = ${instanceId}`;
  if (await fits(Number(row?.memory_bytes ?? DEFAULT_NEED_BYTES))) return true;
  waiting.since ??= Date.now();
  if (Date.now() - waiting.since > env().WAKE_ROOM_WAIT_MS) {
    await markWakeBackInLine(instanceId);
    throw new NoRoomToWakeError("the host has no memory free to wake the agent");
  }
  return false;
}

/**
 * Runs `wake` once the instance's turn has come and a slot is free, holding the slot while it
 * runs. An instance that is no longer asleep needs no slot: `wake` runs at once (and finds
 * nothing to do). `signal` (the job's) ends a wait whose job was given up. A wake takes the
 * instance's lock waiting, in its slot: its instance sleeps, so no provision holds that lock
 * while it waits for a slot (node-slots.ts's lock order).
 */
export async function withWakeSlot<T>(
  instanceId: string,
  wake: () => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  const waitingForRoom = { since: undefined as number | undefined };
  const node = await gatewayNodeOf(instanceId);
  await markWakeNode(instanceId, node);
  const woken = await withNodeSlot(
    node,
    {
      place: async () => {
        const turn = await takeWakeTurn(instanceId);
        if (!turn.sleeping) return undefined;
        if (turn.ahead > 0) return turn.ahead;
        // At the head of the line, a wake still waits for memory (counted as one ahead).
        return (await roomToWake(instanceId, waitingForRoom)) ? 0 : 1;
      },
      pollMs: () => POLL_MS,
      started: () => markWakeStarted(instanceId),
      // A wake that failed goes back to its place for its job's retry.
      failed: () => markWakeBackInLine(instanceId),
    },
    wake,
    signal,
  );
  return woken.ran ? woken.value : wake();
}
