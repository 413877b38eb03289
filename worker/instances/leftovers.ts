import { jobAttempt } from "../../app/server/platform/jobs.server.ts";
import { LABELS } from "../runtime/index.ts";
import { deploymentLabels, log, rt } from "./engine.ts";

// What a dead job left behind: one-shot containers (config writes, volume copies) that its
// process never got to remove. Every object a job creates is labelled with the job and attempt
// (engine.ts ownerLabels), so a one-shot is live only while that attempt of its job runs.

const oneShots = (extra: Record<string, string> = {}) =>
  rt().list({ [LABELS.managed]: "1", [LABELS.role]: "one-shot", ...deploymentLabels(), ...extra });

/**
 * Removes the instance's one-shot containers. The caller holds the instance's lock, and every
 * one-shot of an instance runs under it, so none of them is live.
 */
export async function removeInstanceLeftovers(instanceId: string): Promise<string[]> {
  const found = await oneShots({ [LABELS.instanceId]: instanceId });
  for (const c of found) await rt().remove(c.id);
  if (found.length)
    log().warn({ instanceId, containers: found.map((c) => c.id) }, "removed leftovers");
  return found.map((c) => c.id);
}

/** Is this attempt of the job still running (not died, failed, released or retried)? */
export async function attemptAlive(name: string, id: string, attempt: number): Promise<boolean> {
  const job = await jobAttempt(name, id);
  return job?.state === "active" && job.retryCount === attempt;
}

/** Is the attempt of the job that created this container still running? */
async function ownerAlive(labels: Record<string, string>): Promise<boolean> {
  const name = labels[LABELS.job];
  const id = labels[LABELS.jobId];
  if (!name || !id) return true; // not made by a job (a test, a script): not ours to judge
  return attemptAlive(name, id, Number(labels[LABELS.jobAttempt]));
}

/** Removes one-shots of this deployment whose job attempt is over (died, failed or retried). */
export async function removeDeadJobLeftovers(): Promise<string[]> {
  const removed: string[] = [];
  for (const c of await oneShots()) {
    if (await ownerAlive(c.labels)) continue;
    await rt().remove(c.id);
    removed.push(c.id);
  }
  if (removed.length) log().warn({ containers: removed }, "removed one-shots of dead jobs");
  return removed;
}
