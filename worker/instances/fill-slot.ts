import { usersWaitingOn } from "../../app/server/agents/boot-queue.server.ts";
import { restartsWaitingOn } from "../../app/server/agents/restart-queue.server.ts";
import { withNodeSlot } from "./node-slots.ts";

// A pooled gateway's boot takes one of its node's boot slots too (decision 0241), last of all:
// a warm pool only makes a later provision faster, so it waits while a user's boot, a wake or a
// reconcile restart on the node still waits.

/** How often a waiting fill looks (a fill is in no hurry; each look queries the database). */
const POLL_MS = 1_000;

/** Runs `boot` (start until healthy) in one of the node's slots once nothing else waits there. */
export async function withFillSlot<T>(node: string, boot: () => Promise<T>): Promise<T> {
  const booted = await withNodeSlot(
    node,
    {
      place: async () => (await usersWaitingOn(node)) + (await restartsWaitingOn(node)),
      pollMs: () => POLL_MS,
    },
    boot,
  );
  // place() always answers a number: a fill is never "nothing to do".
  if (!booted.ran) throw new Error("a pool fill left its line without booting");
  return booted.value;
}
