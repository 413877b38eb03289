import type { TransactionSql } from "postgres";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { logger } from "../platform/logger.server.ts";
import { agentStatus, getInstanceByUser, type InstanceRow } from "./instances.server.ts";
import { type RunEstimate, runEstimate } from "./progress-estimate.server.ts";

// Start-up progress (issue 25): the worker records each step it reaches within a run (a
// provision, start, restart, update, repair or wake); the agent page, the chat, the event
// stream and GET /api/agents/:id show them. Decisions 0137 and 0158.

export const PROGRESS_STEPS = [
  "container-created",
  "gateway-healthy",
  "paired",
  "warmed-up",
  "ready",
] as const;
export type ProgressStep = (typeof PROGRESS_STEPS)[number];

export const RUN_ACTIONS = ["provision", "start", "restart", "update", "repair", "wake"] as const;
export type RunAction = (typeof RUN_ACTIONS)[number];
export type RunPath = "pool" | "cold";

/** The steps each kind of run goes through, in order (a skipped one stays empty). */
const RUN_STEPS: Record<RunAction, readonly ProgressStep[]> = {
  provision: PROGRESS_STEPS,
  start: ["container-created", "gateway-healthy", "ready"],
  restart: ["container-created", "gateway-healthy", "ready"],
  wake: ["container-created", "gateway-healthy", "ready"],
  update: ["container-created", "gateway-healthy", "ready"],
  repair: ["container-created", "gateway-healthy", "paired", "ready"],
};

export const STEP_LABELS: Record<ProgressStep, string> = {
  "container-created": "Container created",
  "gateway-healthy": "Gateway healthy",
  paired: "Paired with the platform",
  "warmed-up": "Warmed up",
  ready: "Ready",
};

/** Where a run's step means something else than provisioning's. */
const ACTION_LABELS: Partial<Record<RunAction, Partial<Record<ProgressStep, string>>>> = {
  start: { "container-created": "Container started" },
  restart: { "container-created": "Container restarted" },
  wake: { "container-created": "Container started" },
  update: { "container-created": "Container created on the new image" },
  repair: { "container-created": "Container recreated", paired: "Configuration re-applied" },
};

const order = (step: string) => PROGRESS_STEPS.indexOf(step as ProgressStep);

type Tx = TransactionSql;

interface RunRow {
  id: number;
  action: RunAction;
  path: RunPath | null;
  started_at: Date;
  finished_at: Date | null;
  outcome: "ready" | "failed" | null;
}

/** Runs kept per instance (older ones are deleted as a new one begins). */
export const RUNS_KEPT = 50;

/** Progress is for people to watch: a failure to record it is logged, never fails the job. */
async function quietly(what: string, instanceId: string, fn: (sql: Tx) => Promise<unknown>) {
  try {
    await db().begin(async (sql) => {
      // Serialises concurrent recorders of one instance (its row lock).
      await sql`select 1 from instances where id = ${instanceId} for update`;
      await fn(sql);
    });
  } catch (error) {
    logger().warn({ err: error, instanceId }, `progress: ${what} not recorded`);
  }
}

async function newRun(sql: Tx, instanceId: string, action: RunAction) {
  // A run still open when another begins was cut short (a worker died, a retry): it failed.
  await sql`update instance_runs set finished_at = clock_timestamp(), outcome = 'failed'
    where instance_id = ${instanceId} and finished_at is null`;
  await sql`delete from instance_progress where instance_id = ${instanceId}`;
  const [run] = await sql<{ id: number }[]>`
    insert into instance_runs (instance_id, action) values (${instanceId}, ${action})
    returning id`;
  // The history an instance keeps: enough for its page and the estimates (which read the
  // latest runs of all instances), bounded however often it restarts.
  await sql`delete from instance_runs where instance_id = ${instanceId} and id <= (
    select id from instance_runs where instance_id = ${instanceId}
    order by id desc offset ${RUNS_KEPT} limit 1)`;
  return run?.id as number;
}

/** A new run of `action` begins: the previous run's steps are cleared. */
export function beginRun(instanceId: string, action: RunAction): Promise<void> {
  return quietly(`run ${action}`, instanceId, (sql) => newRun(sql, instanceId, action));
}

/** The open run took this path (a pooled gateway adopted, or a cold boot). */
export function setRunPath(instanceId: string, path: RunPath): Promise<void> {
  return quietly(`path ${path}`, instanceId, async (sql) => {
    await sql`update instance_runs set path = ${path}
      where instance_id = ${instanceId} and finished_at is null`;
  });
}

/** The open run ended without reaching `ready`. */
export function failRun(instanceId: string): Promise<void> {
  return quietly("failure", instanceId, async (sql) => {
    await sql`update instance_runs set finished_at = clock_timestamp(), outcome = 'failed'
      where instance_id = ${instanceId} and finished_at is null`;
  });
}

/**
 * Records that `instanceId` reached `step` in its open run; `ready` ends the run. Without an
 * open run, a first step begins one (of `action`, provision unless said) and a later step is a
 * late echo of a finished run (ignored); a step not later than the last one begins a new run of
 * the same action (a retried job).
 */
export function recordStep(
  instanceId: string,
  step: ProgressStep,
  action: RunAction = "provision",
): Promise<void> {
  return quietly(`step ${step}`, instanceId, async (sql) => {
    const [open] = await sql<{ id: number; action: RunAction }[]>`
      select id, action from instance_runs
      where instance_id = ${instanceId} and finished_at is null order by id desc limit 1`;
    let runId = open?.id;
    if (!open) {
      if (step !== "container-created") return;
      runId = await newRun(sql, instanceId, action);
    } else {
      const [last] = await sql<{ step: string }[]>`
        select step from instance_progress where instance_id = ${instanceId}
        order by at desc limit 1`;
      if (last && order(last.step) >= order(step))
        runId = await newRun(sql, instanceId, open.action);
    }
    await sql`insert into instance_progress (instance_id, step, run_id)
      values (${instanceId}, ${step}, ${runId as number})
      on conflict (instance_id, step) do update set at = excluded.at, run_id = excluded.run_id`;
    if (step === "ready") {
      await sql`update instance_runs set finished_at = clock_timestamp(), outcome = 'ready'
        where id = ${runId as number}`;
    }
  });
}

export interface ProgressView {
  /** The kind of run shown (provision when none is recorded yet). */
  action: RunAction;
  /** When the run began (null: nothing recorded yet, e.g. still queued). */
  startedAt: string | null;
  /** The last step reached (null: nothing recorded yet). */
  step: ProgressStep | null;
  /** The run's steps in order, with when each was reached (null: not yet). */
  steps: Array<{ step: ProgressStep; label: string; at: string | null }>;
  /** How long such a run usually takes here (null: no history yet). */
  estimate: RunEstimate | null;
  /** A run is under way (begun, neither ready nor failed yet). */
  open: boolean;
}

/** Statuses in which the worker is bringing the gateway up: a chat waits for them to end. */
export const STARTING_STATUSES = ["provisioning", "starting", "updating"];

/** What the database records of an instance's progress: its latest run and that run's steps. */
export interface RecordedProgress {
  run: RunRow | undefined;
  steps: Array<{ step: ProgressStep; at: Date }>;
}

export async function readProgress(instance: InstanceRow | undefined): Promise<RecordedProgress> {
  if (!instance) return { run: undefined, steps: [] };
  const [runs, steps] = await Promise.all([
    db()<RunRow[]>`
      select id, action, path, started_at, finished_at, outcome from instance_runs
      where instance_id = ${instance.id} order by id desc limit 1`,
    db()<{ step: ProgressStep; at: Date }[]>`
      select step, at from instance_progress where instance_id = ${instance.id} order by at`,
  ]);
  return { run: runs[0], steps };
}

/** The progress of the instance's current run. */
export async function instanceProgress(instance: InstanceRow | undefined): Promise<ProgressView> {
  return progressView(instance, await readProgress(instance));
}

/**
 * The view of recorded progress (which it does not change: it may be a kept read). While the
 * instance is starting again, a finished earlier run is not shown: the new run has recorded
 * nothing yet.
 */
export async function progressView(
  instance: InstanceRow | undefined,
  recorded: RecordedProgress,
): Promise<ProgressView> {
  let run = recorded.run;
  let rows = recorded.steps;
  const status = agentStatus(instance);
  const starting = STARTING_STATUSES.includes(status);
  if (starting && (run?.finished_at || rows.at(-1)?.step === "ready")) {
    run = undefined;
    rows = [];
  }
  // Before the worker begins the run: a paired gateway coming up again is a start (or update).
  const again = starting && instance?.paired_at;
  const action =
    run?.action ?? (again ? (status === "updating" ? "update" : "start") : "provision");
  const at = new Map(rows.map((r) => [r.step, r.at.toISOString()]));
  const labels = ACTION_LABELS[action] ?? {};
  return {
    action,
    startedAt: run?.started_at.toISOString() ?? null,
    step: rows.at(-1)?.step ?? null,
    steps: RUN_STEPS[action].map((step) => ({
      step,
      label: labels[step] ?? STEP_LABELS[step],
      at: at.get(step) ?? null,
    })),
    // How long such a run usually takes: a global figure, read afresh (not part of a kept read).
    estimate: starting ? await runEstimate(action, run?.path ?? null) : null,
    open: Boolean(run && !run.finished_at),
  };
}

/**
 * A chat sent while the agent is starting waits for it (up to AGENT_CHAT_START_WAIT_MS) instead
 * of failing with "gateway unavailable"; any other state answers at once (the chat then says
 * what is wrong).
 */
export async function waitWhileStarting(
  userId: string,
  waitMs = env().AGENT_CHAT_START_WAIT_MS,
): Promise<void> {
  const deadline = Date.now() + waitMs;
  // Short steps: a thawed sleeper is ready ~1 s after its wake began, and a chat that polled
  // at 1 s steps found out up to a second late (decision 0178). One indexed read per step.
  for (let delay = 100; ; delay = Math.min(delay * 2, 250)) {
    const instance = await getInstanceByUser(userId);
    const status = agentStatus(instance);
    if (!instance || !STARTING_STATUSES.includes(status)) return;
    const left = deadline - Date.now();
    if (left <= 0) return;
    await new Promise((r) => setTimeout(r, Math.min(delay, left)));
  }
}

/** Whether a provisioning of the instance is under way (it marks the instance running itself). */
export async function provisioningUnderWay(instanceId: string): Promise<boolean> {
  const [open] = await db()`select 1 from instance_runs
    where instance_id = ${instanceId} and finished_at is null and action = 'provision' limit 1`;
  return Boolean(open);
}

/** Runs whose gateway comes up after the action returns: the worker's observation ends them. */
const BOOT_ACTIONS: RunAction[] = ["start", "restart", "wake"];

/**
 * The gateway of a started, restarted or woken instance was seen healthy: its open run gets
 * the steps it has not recorded yet (`gateway-healthy`, `ready`) and ends. Idempotent.
 */
export function finishBootRun(instanceId: string): Promise<void> {
  return quietly("boot end", instanceId, async (sql) => {
    const [open] = await sql<{ id: number }[]>`
      select id from instance_runs where instance_id = ${instanceId} and finished_at is null
        and action in ${sql(BOOT_ACTIONS)}
      order by id desc limit 1`;
    if (!open) return;
    for (const step of ["gateway-healthy", "ready"] as const) {
      await sql`insert into instance_progress (instance_id, step, run_id)
        values (${instanceId}, ${step}, ${open.id}) on conflict (instance_id, step) do nothing`;
    }
    await sql`update instance_runs set finished_at = clock_timestamp(), outcome = 'ready'
      where id = ${open.id}`;
  });
}
