import type { InstanceRow } from "../../app/server/agents/instances.server.ts";
import { reconcileLocked } from "./reconcile.ts";

// A gateway that exits is restarted through reconcile's line (decision 0241). Its restart policy
// is `no` (container.ts), so the engine no longer restarts it at once on a starved CPU; reconcile
// runs once a minute, so the sampler's pass (every INSTANCE_SAMPLE_INTERVAL_MS, 10 s) heals a
// gateway it sees down at once: its exit is recorded, its crash backoff applied, and its restart
// queued in the line, as reconcile's pass does.

/** What the sampler's observation says of a gateway that is down though it should run. */
const DOWN = new Set(["crashed", "oom_killed", "stopped", "missing"]);

/** Heals the instance now if its observation says it is down; returns what reconcile did. */
export async function healIfDown(seen: InstanceRow): Promise<string | undefined> {
  if (seen.desired_state !== "running" || !seen.container_id) return undefined;
  if (!DOWN.has(seen.observed_state)) return undefined;
  return reconcileLocked(seen);
}
