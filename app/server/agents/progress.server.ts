import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { logger } from "../platform/logger.server.ts";
import { agentStatus, getInstanceByUser, type InstanceRow } from "./instances.server.ts";

// Provisioning progress (issue 25): the worker records each step it reaches; the agent page, the
// chat and GET /api/agents/:id show them. docs/decisions/0137-provisioning-progress.md

export const PROGRESS_STEPS = [
  "container-created",
  "gateway-healthy",
  "paired",
  "warmed-up",
  "ready",
] as const;
export type ProgressStep = (typeof PROGRESS_STEPS)[number];

export const STEP_LABELS: Record<ProgressStep, string> = {
  "container-created": "Container created",
  "gateway-healthy": "Gateway healthy",
  paired: "Paired with the platform",
  "warmed-up": "Warmed up",
  ready: "Ready",
};

const order = (step: string) => PROGRESS_STEPS.indexOf(step as ProgressStep);

/**
 * Records that `instanceId` reached `step`. A step not later than the last one recorded begins a
 * new run (a restart, a repair, a retried provisioning), so earlier runs' steps are cleared.
 * Progress is for people to watch: a failure to record it is logged, never fails the job.
 */
export async function recordStep(instanceId: string, step: ProgressStep): Promise<void> {
  try {
    await db().begin(async (sql) => {
      // Serialises concurrent recorders of one instance (its row lock).
      await sql`select 1 from instances where id = ${instanceId} for update`;
      const [last] = await sql<{ step: string }[]>`
        select step from instance_progress where instance_id = ${instanceId}
        order by at desc limit 1`;
      if (last && order(last.step) >= order(step)) {
        await sql`delete from instance_progress where instance_id = ${instanceId}`;
      }
      await sql`insert into instance_progress (instance_id, step) values (${instanceId}, ${step})
        on conflict (instance_id, step) do update set at = excluded.at`;
    });
  } catch (error) {
    logger().warn({ err: error, instanceId, step }, "progress step not recorded");
  }
}

export interface ProgressView {
  /** The last step reached (null: nothing recorded yet, e.g. still queued). */
  step: ProgressStep | null;
  /** Every step in order, with when it was reached (null: not yet). */
  steps: Array<{ step: ProgressStep; label: string; at: string | null }>;
}

/** Statuses in which the worker is bringing the gateway up: a chat waits for them to end. */
export const STARTING_STATUSES = ["provisioning", "starting", "updating"];

/**
 * The progress of the instance's current run. While it is starting again, a finished earlier
 * run (its "ready") is not shown: the new run has recorded nothing yet.
 */
export async function instanceProgress(instance: InstanceRow | undefined): Promise<ProgressView> {
  const rows = instance
    ? await db()<{ step: ProgressStep; at: Date }[]>`
        select step, at from instance_progress where instance_id = ${instance.id} order by at`
    : [];
  const starting = STARTING_STATUSES.includes(agentStatus(instance));
  if (starting && rows.at(-1)?.step === "ready") rows.length = 0;
  const at = new Map(rows.map((r) => [r.step, r.at.toISOString()]));
  return {
    step: rows.at(-1)?.step ?? null,
    steps: PROGRESS_STEPS.map((step) => ({
      step,
      label: STEP_LABELS[step],
      at: at.get(step) ?? null,
    })),
  };
}

/**
 * A chat sent while the agent is starting waits for it (up to AGENT_CHAT_START_WAIT_MS) instead
 * of failing with "gateway unavailable"; any other state answers at once (the chat then says
 * what is wrong).
 */
export async function waitWhileStarting(userId: string): Promise<void> {
  const deadline = Date.now() + env().AGENT_CHAT_START_WAIT_MS;
  for (let delay = 200; ; delay = Math.min(delay * 2, 1_000)) {
    const instance = await getInstanceByUser(userId);
    const status = agentStatus(instance);
    if (!instance || !STARTING_STATUSES.includes(status)) return;
    if (Date.now() + delay > deadline) return;
    await new Promise((r) => setTimeout(r, delay));
  }
}
