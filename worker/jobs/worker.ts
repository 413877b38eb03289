import type { PgBoss } from "pg-boss";
import { env } from "../../app/server/platform/env.server.ts";
import {
  getBoss,
  jobCatalog,
  jobNames,
  jobSchedules,
  stopBoss,
} from "../../app/server/platform/jobs.server.ts";
import { logger } from "../../app/server/platform/logger.server.ts";
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
        ...jobCatalog[name].work,
      },
      async ([job]) => {
        if (!job) return;
        const log = logger().child({ job: name, jobId: job.id, attempt: job.retryCount });
        const payload = schema.parse(job.data);
        const started = performance.now();
        try {
          const result = await runAsJob({ name, id: job.id, retryCount: job.retryCount }, () =>
            handler(payload, { jobId: job.id, retryCount: job.retryCount, signal: job.signal }),
          );
          log.info({ ms: Math.round(performance.now() - started) }, "job done");
          return result;
        } catch (error) {
          log.warn({ err: error }, "job failed");
          throw error;
        }
      },
    );
  }
  for (const [name, cron] of Object.entries(jobSchedules)) {
    await boss.schedule(name, cron(), {});
  }
  logger().info({ queues: jobNames }, "worker ready");
  return boss;
}

/**
 * Stops fetching and lets in-flight jobs finish for up to the grace period; pg-boss then fails
 * what still runs back to the queue (a retry another worker takes within seconds, since every
 * handler is idempotent) before the pool closes, so nothing stays `active` until its expiry.
 */
export async function stopWorker(timeoutMs = env().WORKER_STOP_GRACE_MS): Promise<void> {
  await stopBoss({ graceful: true, timeout: timeoutMs });
}
