import type { JobWithMetadata, PgBoss } from "pg-boss";
import type { z } from "zod";
import { env } from "../../app/server/platform/env.server.ts";
import {
  getBoss,
  jobCatalog,
  jobNames,
  jobSchedules,
  requestIdOfJob,
  stopBoss,
} from "../../app/server/platform/jobs.server.ts";
import { logger } from "../../app/server/platform/logger.server.ts";
import { runWithRequestId } from "../../app/server/platform/request-context.server.ts";
import { recordJob } from "../metrics.ts";
import { type JobContext, runAsJob } from "./context.ts";
import { handlers } from "./index.ts";

export interface WorkerOptions {
  /** Jobs of one queue processed at once by this process. */
  concurrency?: number;
}

/** Registers a handler for every job in the catalog; payloads are validated before they run. */
export async function startWorker(options: WorkerOptions = {}): Promise<PgBoss> {
  const boss = await getBoss({ role: "worker" });
  for (const name of jobNames) {
    const handler = handlers[name] as (payload: unknown, ctx: JobContext) => Promise<unknown>;
    const schema = jobCatalog[name].schema;
    await boss.work(
      name,
      {
        batchSize: 1,
        localConcurrency: options.concurrency ?? 2,
        pollingIntervalSeconds: 2,
        // For createdOn: an operation's time is counted from when it was asked for.
        includeMetadata: true as const,
        ...jobCatalog[name].work,
      },
      async ([job]) => {
        if (!job) return;
        // A job a request enqueued runs under that request's id: its log lines (and the jobs
        // it enqueues in turn) carry it. Others get one of their own, for the same reason.
        const requestId = requestIdOfJob(job.data) ?? `job-${job.id}`;
        return runWithRequestId(requestId, () => run(name, job, handler, schema));
      },
    );
  }
  for (const [name, cron] of Object.entries(jobSchedules)) {
    await boss.schedule(name, cron(), {});
  }
  logger().info({ queues: jobNames }, "worker ready");
  return boss;
}

async function run(
  name: string,
  job: JobWithMetadata<unknown>,
  handler: (payload: unknown, ctx: JobContext) => Promise<unknown>,
  schema: z.ZodType,
): Promise<unknown> {
  const log = logger().child({ job: name, jobId: job.id, attempt: job.retryCount });
  const payload = schema.parse(job.data);
  const started = performance.now();
  log.info("job started");
  try {
    const result = await runAsJob({ name, id: job.id, retryCount: job.retryCount }, () =>
      handler(payload, { jobId: job.id, retryCount: job.retryCount, signal: job.signal }),
    );
    const ms = performance.now() - started;
    recordJob(name, job.data, "ok", ms / 1000, job.createdOn);
    log.info({ ms: Math.round(ms) }, "job done");
    return result;
  } catch (error) {
    recordJob(name, job.data, "error", (performance.now() - started) / 1000, job.createdOn);
    log.warn({ err: error }, "job failed");
    throw error;
  }
}

/**
 * Stops fetching and lets in-flight jobs finish for up to the grace period; pg-boss then fails
 * what still runs back to the queue (a retry another worker takes within seconds, since every
 * handler is idempotent) before the pool closes, so nothing stays `active` until its expiry.
 */
export async function stopWorker(timeoutMs = env().WORKER_STOP_GRACE_MS): Promise<void> {
  await stopBoss({ graceful: true, timeout: timeoutMs });
}
