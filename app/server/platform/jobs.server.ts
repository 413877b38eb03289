import { PgBoss, type Queue, type SendOptions } from "pg-boss";
import { z } from "zod";
import { db } from "./db.server.ts";
import { env } from "./env.server.ts";
import { logger } from "./logger.server.ts";
import { currentRequestId } from "./request-context.server.ts";

// The job catalog: every background job's name, payload schema and queue policy (retries,
// expiry). `sendJob` (web and worker) and the worker's `work` registration both read it, so a
// payload is validated on the way in and on the way out.

type QueuePolicy = Omit<Queue, "name">;

/** How the worker polls a queue (NOTIFY wakes it for new jobs, not for scheduled retries). */
interface WorkPolicy {
  notifyPollingIntervalSeconds?: number;
  /** Jobs of this queue one worker runs at once (else the worker's default). */
  localConcurrency?: number;
}

interface JobDefinition<S extends z.ZodType> {
  schema: S;
  queue: QueuePolicy;
  work: WorkPolicy;
}

/**
 * Jobs that drive the container runtime carry a heartbeat: the worker refreshes it every 5 s, and
 * a job whose worker died (kill -9, a lost host) is failed and retried once it is 10 s stale
 * (pg-boss's minimum), not at its expiry (docs/decisions/0130-crash-recovery-and-engine-health.md).
 */
export const HEARTBEAT_SECONDS = 10;
/** How often a worker's pg-boss supervisor looks for stale heartbeats and expired jobs. */
export const MONITOR_SECONDS = 5;

const define = <S extends z.ZodType>(
  schema: S,
  policy: QueuePolicy,
  work: WorkPolicy = {},
): JobDefinition<S> => ({
  schema,
  queue: { notify: true, ...policy },
  work,
});

/**
 * A job that drives the container runtime: heartbeats, and a 2 s backstop poll, since NOTIFY
 * wakes workers for new jobs but not for retries (pg-boss's backstop is 30 s).
 */
const defineRuntimeJob = <S extends z.ZodType>(
  schema: S,
  policy: QueuePolicy,
  work: WorkPolicy = {},
) =>
  define(
    schema,
    { heartbeatSeconds: HEARTBEAT_SECONDS, ...policy },
    { notifyPollingIntervalSeconds: 2, ...work },
  );

export const jobCatalog = {
  "send-email": define(
    z.object({
      to: z.email(),
      subject: z.string().min(1).max(200),
      text: z.string().min(1),
      html: z.string().optional(),
      // A white-label sender name (decision 0207): one line, no control characters.
      fromName: z
        .string()
        .min(1)
        .max(60)
        .refine((s) => ![...s].some((c) => c < " " || c === "\u007f"))
        .optional(),
    }),
    { retryLimit: 5, retryDelay: 5, retryBackoff: true, retryDelayMax: 600, expireInSeconds: 60 },
  ),
  // Lists every configured AI provider's models and prices into ai_models (periodic).
  "refresh-model-catalog": define(z.object({}).default({}), {
    retryLimit: 2,
    retryDelay: 30,
    expireInSeconds: 120,
  }),
  // Releases credit holds whose process stopped renewing them (periodic, every minute: 0223).
  "sweep-credit-holds": define(z.object({}).default({}), { retryLimit: 0, expireInSeconds: 60 }),
  // One outgoing event to one operator endpoint. Backoff from ~1-2 s doubling to an hour: 14
  // retries span about four hours (docs/decisions/0015-outgoing-events.md). NOTIFY wakes the
  // worker for new jobs but not for scheduled retries, so this queue's backstop poll is 2 s
  // (pg-boss's default is 30 s) and early retries happen when they are due.
  "deliver-webhook": define(
    z.object({ eventId: z.string().min(1), url: z.url() }),
    { retryLimit: 14, retryDelay: 1, retryBackoff: true, retryDelayMax: 3600, expireInSeconds: 60 },
    { notifyPollingIntervalSeconds: 2 },
  ),
  // Agent runtime (issue 4). Handlers in worker/jobs/*-instance.ts, reconcile.ts; each is
  // idempotent and holds a per-instance lock, so two deliveries never act at once.
  // A retry (a dead worker's job, released by a stopping worker) starts in 1-2 s; the later ones
  // outlast an engine outage of a few minutes (1, 2, 4 … 60 s: ~4 min), which the soak's 30 s
  // one exhausted when three retries took 7 s and left the agent `new` for good.
  "provision-instance": defineRuntimeJob(z.object({ instanceId: z.string().min(1) }), {
    retryLimit: 9,
    retryDelay: 1,
    retryBackoff: true,
    retryDelayMax: 60,
    expireInSeconds: 600,
  }),
  // Accepted only while the engine answers (502 otherwise); an outage after that is retried
  // for about five minutes rather than losing the update.
  "update-image": defineRuntimeJob(z.object({ instanceId: z.string().min(1) }), {
    retryLimit: 6,
    retryDelay: 5,
    retryBackoff: true,
    retryDelayMax: 120,
    expireInSeconds: 600,
  }),
  // A lifecycle request the web awaits (start, stop, restart, repair, reset-memory): no retry,
  // the outcome is the job's output. A start, restart or repair waits for a boot slot inside the
  // job (decision 0241), holding no lock while it waits, so many are fetched at once: a stop is
  // never left unfetched behind boots that wait.
  "instance-action": defineRuntimeJob(
    z.object({
      instanceId: z.string().min(1),
      action: z.enum(["start", "stop", "restart", "repair", "reset-memory"]),
    }),
    { retryLimit: 0, expireInSeconds: 300 },
    { localConcurrency: 32 },
  ),
  // A booted tenant gateway's dry run once it is healthy (decision 0087): best effort, no retry.
  "warm-up-instance": defineRuntimeJob(z.object({ instanceId: z.string().min(1) }), {
    retryLimit: 0,
    expireInSeconds: 600,
  }),
  // Writes all of a user's agents into their gateway's config (issue 5; worker/agents.ts).
  // Idempotent: the rows are the truth, so a retry or a duplicate changes nothing.
  "sync-agents": defineRuntimeJob(z.object({ userId: z.string().min(1) }), {
    retryLimit: 3,
    retryDelay: 10,
    retryBackoff: true,
    expireInSeconds: 300,
  }),
  // Scale-to-zero (decision 0164): the periodic pass that puts idle instances to sleep, and the
  // wake of one sleeping instance (asked by a chat, an ingress visit or a channel message).
  "sleep-idle-instances": defineRuntimeJob(z.object({}).default({}), {
    retryLimit: 0,
    expireInSeconds: 600,
  }),
  // A wake waits its turn for a wake slot inside its job (decision 0221): a worker fetches many
  // at once, so a wake asked for earlier is never left unfetched behind later ones that wait.
  "wake-instance": defineRuntimeJob(
    z.object({ instanceId: z.string().min(1) }),
    { retryLimit: 2, retryDelay: 1, expireInSeconds: 600 },
    { localConcurrency: 32 },
  ),
  // Reconcile's restart of a gateway that went down (an engine restart, a crash): it waits its
  // turn for one of its node's boot slots, the wakes' (decision 0240), inside the job, so the
  // reconcile pass never waits for boots. Fetched many at once (a restart queued earlier is
  // never left unfetched behind later ones that wait); the wait can outlast a wake's, hence the
  // expiry. A retry (a dead worker's) keeps its place; one given up is queued again by reconcile.
  "restart-instance": defineRuntimeJob(
    z.object({ instanceId: z.string().min(1) }),
    { retryLimit: 2, retryDelay: 1, expireInSeconds: 3600 },
    { localConcurrency: 32 },
  ),
  // Keeps RUNTIME_POOL_SIZE warm gateways (periodic, and after each adoption). One retry: a
  // dead worker's fill is retried within seconds, and the retry discards the gateway the dead
  // attempt left 'starting' (worker/instances/pool-dead-fills.ts) instead of the next cron's fill.
  "fill-pool": defineRuntimeJob(z.object({}).default({}), {
    retryLimit: 1,
    retryDelay: 1,
    expireInSeconds: 900,
  }),
  // Deletes an uninstalled skill's folder from a gateway's state volume (the gateway protocol
  // writes skill folders but has no call that deletes one; decision 0110). Awaited by the web.
  "remove-skill-folder": defineRuntimeJob(
    z.object({
      instanceId: z.string().min(1),
      dir: z.string().min(1).max(500),
      name: z.string().min(1).max(100),
    }),
    { retryLimit: 0, expireInSeconds: 120 },
  ),
  // Periodic: compares desired with observed state of every instance, heals, removes orphans.
  reconcile: defineRuntimeJob(z.object({}).default({}), { retryLimit: 0, expireInSeconds: 300 }),
  // Storage limits (decisions 0216, 0217): samples every limited volume's usage, applies the
  // limit each user is owed (a storage upgrade, an operator's override, a lowering after its
  // grace) and sends the 80 % / 95 % warnings; with a userId, that user's instance alone (a
  // completed upgrade raises the limit at once). Idempotent: a second run finds nothing to do.
  "sample-storage": defineRuntimeJob(
    z.object({ userId: z.string().min(1).optional() }).default({}),
    { retryLimit: 2, retryDelay: 10, expireInSeconds: 300 },
  ),
  // Periodic: removes OpenClaw's stale temporary folders from running gateways (decision 0224).
  "sweep-gateway-tmp": defineRuntimeJob(z.object({}).default({}), {
    retryLimit: 0,
    expireInSeconds: 900,
  }),
  // Periodic: removes Control UI devices left paired by a web process that died (decision 0170).
  "sweep-control-ui-devices": defineRuntimeJob(z.object({}).default({}), {
    retryLimit: 0,
    expireInSeconds: 600,
  }),
  // Backups (issue 26, decision 0140): take one pending backup (its row names the agent), restore
  // one, and the periodic pass that schedules each plan's backups and prunes past retention.
  "backup-agent": defineRuntimeJob(z.object({ backupId: z.string().min(1) }), {
    retryLimit: 2,
    retryDelay: 30,
    expireInSeconds: 1800,
  }),
  // Awaited by the web; no retry (a failed restore has already put the old state back).
  "restore-backup": defineRuntimeJob(z.object({ backupId: z.string().min(1) }), {
    retryLimit: 0,
    expireInSeconds: 1800,
  }),
  "scheduled-backups": define(z.object({}).default({}), { retryLimit: 0, expireInSeconds: 600 }),
  // An operator's drain of a node (decision 0167): one at a time per node, no retry (a failed
  // move has put its instance back; the operator asks again).
  "drain-node": defineRuntimeJob(z.object({ nodeId: z.string().min(1).max(64) }), {
    retryLimit: 0,
    expireInSeconds: 3600,
  }),
  // An operator's re-creation of a lost node's instances from their latest backups (decision
  // 0167); no retry: each instance's outcome is on it, and the operator asks again.
  "recover-node": defineRuntimeJob(z.object({ nodeId: z.string().min(1).max(64) }), {
    retryLimit: 0,
    expireInSeconds: 3600,
  }),
  // Copies an agent's gateway state into its clone (decision 0162); awaited by the web, which
  // removes the clone when it fails, so no retry.
  "clone-agent": defineRuntimeJob(
    z.object({
      userId: z.string().min(1),
      sourceAgentId: z.string().min(1),
      agentId: z.string().min(1),
    }),
    { retryLimit: 0, expireInSeconds: 900 },
  ),
  // Removes a deleted user's instance: container, volume, tokens (enqueued by DELETE /api/user),
  // or one instance by id (the user's last agent was deleted: DELETE /api/agents/:id).
  "teardown-instance": defineRuntimeJob(
    z.object({ userId: z.string().min(1), instanceId: z.string().min(1).optional() }),
    {
      retryLimit: 10,
      retryDelay: 30,
      retryBackoff: true,
      retryDelayMax: 3600,
      expireInSeconds: 15 * 60,
    },
  ),
  // A canceled subscription stops the user's instance at its period end (scheduled with
  // startAfter); the handler re-checks the subscription then, so a renewal in between wins.
  "stop-unpaid-instance": define(z.object({ userId: z.string().min(1) }), {
    retryLimit: 5,
    retryDelay: 60,
    retryBackoff: true,
    expireInSeconds: 300,
  }),
  // One stored Stripe event (payment_events): the handler re-reads the session, subscription or
  // invoice from Stripe and applies it idempotently (app/server/billing/webhooks.server.ts).
  "process-payment-event": define(
    z.object({ eventId: z.string().min(1) }),
    {
      retryLimit: 10,
      retryDelay: 2,
      retryBackoff: true,
      retryDelayMax: 3600,
      expireInSeconds: 120,
    },
    { notifyPollingIntervalSeconds: 2 },
  ),
  // Periodic: deletes audit-log entries past their retention (worker/jobs/purge-audit-log.ts).
  "purge-audit-log": define(z.object({}).default({}), {
    retryLimit: 2,
    retryDelay: 60,
    expireInSeconds: 600,
  }),
} as const;

export type JobName = keyof typeof jobCatalog;

/** Periodic jobs: the worker registers these cron schedules (pg-boss `schedule`, UTC). */
export const jobSchedules: Partial<Record<JobName, () => string>> = {
  "refresh-model-catalog": () => env().AI_CATALOG_REFRESH_CRON,
  "sweep-credit-holds": () => env().CREDIT_HOLD_SWEEP_CRON,
  reconcile: () => env().RECONCILE_CRON,
  "sample-storage": () => env().STORAGE_SAMPLE_CRON,
  "sweep-gateway-tmp": () => env().TMP_SWEEP_CRON,
  "sweep-control-ui-devices": () => env().CONTROL_UI_SWEEP_CRON,
  "fill-pool": () => env().RUNTIME_POOL_CRON,
  "sleep-idle-instances": () => env().SLEEP_CRON,
  "scheduled-backups": () => env().BACKUP_CRON,
  "purge-audit-log": () => env().AUDIT_PURGE_CRON,
};
export type JobPayload<N extends JobName> = z.infer<(typeof jobCatalog)[N]["schema"]>;
export const jobNames = Object.keys(jobCatalog) as JobName[];

let boss: Promise<PgBoss> | undefined;
/** Instances whose stop has begun (see the error handler in `create`). */
const stopping = new WeakSet<PgBoss>();

export interface BossOptions {
  /** Workers run pg-boss maintenance and schedules; the web only sends. */
  role: "web" | "worker";
}

function create({ role }: BossOptions): Promise<PgBoss> {
  const { DATABASE_URL } = env();
  if (!DATABASE_URL) throw new Error("DATABASE_URL is not set");
  const instance = new PgBoss({
    connectionString: DATABASE_URL,
    max: role === "worker" ? 5 : 3,
    supervise: role === "worker",
    // Stale heartbeats are found within seconds (pg-boss's default pass is every 60 s).
    superviseIntervalSeconds: MONITOR_SECONDS,
    monitorIntervalSeconds: MONITOR_SECONDS,
    schedule: role === "worker",
    useListenNotify: role === "worker",
    application_name: `agent-platform-boss:${role}`,
  });
  instance.on("error", (error) => {
    // A job still running when the grace period ends is failed back to its queue before the
    // pool closes (pg-boss's stop); its handler's own completion afterwards finds the pool
    // closed. That is a clean shutdown, not an error.
    if (stopping.has(instance) && error.message.includes("connection is not opened")) {
      // pg-boss names the job's queue on the error it raises.
      const queue = "queue" in error && typeof error.queue === "string" ? error.queue : undefined;
      logger().info(
        { queue },
        "job outlived the stop's grace period; it was failed back to its queue",
      );
      return;
    }
    logger().error({ err: error }, "pg-boss error");
  });
  return instance.start().then(async (started) => {
    await createQueues(started);
    return started;
  });
}

async function createQueues(instance: PgBoss): Promise<void> {
  const existing = new Set((await instance.getQueues()).map((q) => q.name));
  for (const name of jobNames) {
    const queue = jobCatalog[name].queue;
    if (existing.has(name)) await instance.updateQueue(name, queue);
    else await instance.createQueue(name, queue);
  }
}

/** The process's started pg-boss (created on first use). */
export function getBoss(options: BossOptions = { role: "web" }): Promise<PgBoss> {
  boss ??= create(options).catch((error) => {
    boss = undefined;
    throw error;
  });
  return boss;
}

export async function stopBoss(options: { graceful: boolean; timeout?: number }): Promise<void> {
  const current = boss;
  boss = undefined;
  if (!current) return;
  const instance = await current;
  stopping.add(instance);
  await instance.stop({ ...options, close: true });
}

/** Creates pg-boss's schema and the catalog's queues (migrations and test templates). */
export async function ensureQueueSchema(): Promise<void> {
  await getBoss({ role: "web" });
  await stopBoss({ graceful: false });
}

/**
 * The key under which a job's data carries the id of the request (or job) that enqueued it:
 * beside the payload, which the catalog's schemas parse without it (zod drops unknown keys).
 */
export const JOB_REQUEST_ID = "requestId";
const jobRequestId = z.object({ [JOB_REQUEST_ID]: z.string().optional() });

/** The request id a job's data carries, if any. */
export function requestIdOfJob(data: unknown): string | undefined {
  const parsed = jobRequestId.safeParse(data);
  return parsed.success ? parsed.data[JOB_REQUEST_ID] : undefined;
}

/** Validates the payload against the catalog and enqueues it. Returns the job id. */
export async function sendJob<N extends JobName>(
  name: N,
  payload: JobPayload<N>,
  options: SendOptions = {},
): Promise<string> {
  const parsed = jobCatalog[name].schema.parse(payload) as object;
  // One id finds the request, its jobs and the worker's work on them (docs/decisions/0202).
  const requestId = currentRequestId();
  const data = requestId ? { ...parsed, [JOB_REQUEST_ID]: requestId } : parsed;
  const id = await (await getBoss()).send(name, data, options);
  if (!id) throw new Error(`Job ${name} was not enqueued (deduplicated by singleton options)`);
  return id;
}

/** True when a job of this name with this payload is waiting, retrying or running. */
export async function hasLiveJob<N extends JobName>(
  name: N,
  payload: JobPayload<N>,
): Promise<boolean> {
  const jobs = await (await getBoss()).findJobs(name, { data: payload as object });
  return jobs.some(
    (job) => job.state === "created" || job.state === "retry" || job.state === "active",
  );
}

/**
 * One payload field of every job of `name` still to run or running (created, retry, active),
 * read from pg-boss's table in one statement: which instances have a wake on its way, say.
 */
export async function liveJobField<N extends JobName>(name: N, field: string): Promise<string[]> {
  const rows = await db()<{ value: string }[]>`
    select distinct data->>${field} as value from pgboss.job
    where name = ${name} and state in ('created', 'retry', 'active')
      and data->>${field} is not null`;
  return rows.map((r) => r.value);
}

/**
 * The live jobs of a queue in the order they were asked for: one entry per value of `field`
 * (its earliest live job), oldest first. A retried job keeps its place (pg-boss keeps its row).
 */
export async function liveJobLine<N extends JobName>(
  name: N,
  field: string,
): Promise<Array<{ value: string; createdOn: Date }>> {
  return db()<Array<{ value: string; createdOn: Date }>>`
    select value, min(created_on) as "createdOn" from (
      select data->>${field} as value, created_on from pgboss.job
      where name = ${name} and state in ('created', 'retry', 'active')) live
    where value is not null
    group by value
    order by 2, 1`;
}

/** A job's state and attempt (its retryCount), or undefined when the job is gone. */
export async function jobAttempt(
  name: string,
  id: string,
): Promise<{ state: string; retryCount: number } | undefined> {
  const job = await (await getBoss()).getJobById(name, id);
  return job ? { state: job.state, retryCount: job.retryCount } : undefined;
}

// --- the operator console's view of the queues ---------------------------------------------------

export const JOB_STATES = [
  "created",
  "retry",
  "active",
  "completed",
  "cancelled",
  "failed",
] as const;
export type JobState = (typeof JOB_STATES)[number];

export type JobCounts = { name: string } & Record<JobState, number> & {
    /** Seconds the oldest job that is due (created or retry, start_after passed) has waited. */
    oldestPendingSeconds: number;
  };

/**
 * Jobs per queue and state, and each queue's oldest due job's wait, straight from pg-boss's
 * table (its own counts lag a monitor pass). The console and Prometheus read these.
 */
export async function jobCounts(): Promise<JobCounts[]> {
  const rows = await db()<
    { name: string; state: JobState; count: number; oldest: number | null }[]
  >`
    select name, state::text as state, count(*)::int as count,
      extract(epoch from now() - min(start_after) filter (
        where state in ('created', 'retry') and start_after <= now()))::float8 as oldest
    from pgboss.job group by name, state`;
  const byName = new Map<string, JobCounts>();
  for (const name of jobNames) {
    byName.set(name, {
      name,
      created: 0,
      retry: 0,
      active: 0,
      completed: 0,
      cancelled: 0,
      failed: 0,
      oldestPendingSeconds: 0,
    });
  }
  for (const row of rows) {
    const entry = byName.get(row.name);
    if (!entry) continue;
    entry[row.state] = row.count;
    if (row.oldest !== null) {
      entry.oldestPendingSeconds = Math.max(entry.oldestPendingSeconds, row.oldest);
    }
  }
  return [...byName.values()];
}

export interface FailedJob {
  id: string;
  name: string;
  error: string;
  retryCount: number;
  createdOn: string;
  completedOn: string | null;
}

const errorOf = (output: unknown): string => {
  if (output && typeof output === "object" && "message" in output) {
    return String((output as { message: unknown }).message);
  }
  return output === null || output === undefined ? "" : JSON.stringify(output);
};

/** The latest failed jobs with their error (pg-boss keeps the thrown error as the output). */
export async function failedJobs(limit = 50): Promise<FailedJob[]> {
  const rows = await db()<
    {
      id: string;
      name: string;
      output: unknown;
      retry_count: number;
      created_on: Date;
      completed_on: Date | null;
    }[]
  >`
    select id::text as id, name, output, retry_count, created_on, completed_on from pgboss.job
    where state = 'failed' order by completed_on desc nulls last, created_on desc limit ${limit}`;
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    error: errorOf(r.output).slice(0, 2000),
    retryCount: r.retry_count,
    createdOn: r.created_on.toISOString(),
    completedOn: r.completed_on?.toISOString() ?? null,
  }));
}

const commandResult = z.object({ affected: z.number() });
const isJobName = (name: string): name is JobName => name in jobCatalog;

/** Retries a failed (or cancelled) job, or cancels a waiting or running one. */
export async function commandJob(
  command: "retry" | "cancel",
  name: string,
  id: string,
): Promise<boolean> {
  if (!isJobName(name)) return false;
  const boss = await getBoss();
  const result = command === "retry" ? await boss.retry(name, id) : await boss.cancel(name, id);
  // pg-boss types its answer as {}; it carries the count of jobs it changed.
  return commandResult.parse(result).affected > 0;
}
