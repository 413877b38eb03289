import { registerDatabaseGauges } from "../app/server/ops/prometheus.server.ts";
import { closeDb, db, resolveDatabaseUrl } from "../app/server/platform/db.server.ts";
import { env } from "../app/server/platform/env.server.ts";
import { sendJob } from "../app/server/platform/jobs.server.ts";
import { logger } from "../app/server/platform/logger.server.ts";
import { collectProcessMetrics } from "../app/server/platform/metrics/registry.server.ts";
import { onStopSignal } from "../app/server/platform/supervisor.server.ts";
import { migrate } from "../db/migrate.ts";
import { ensureNetwork } from "./instances/engine.ts";
import { startEngineWatch } from "./instances/engine-watch.ts";
import { startPlatformWatch } from "./instances/platform-watch.ts";
import { poolSize } from "./instances/pool-size.ts";
import { startRecorder } from "./instances/recorder.ts";
import { startSampler } from "./instances/sampler.ts";
import { startSleepWatch } from "./instances/sleep-watch.ts";
import { startWorker, stopWorker } from "./jobs/worker.ts";
import { startMetricsServer } from "./metrics-server.ts";

// The worker process: `npm run start:worker`. Any number may run against one database.

// Stop signals are taken from the first line: jobs run as soon as the queues are registered,
// before the rest has started (the sampler probes the storage root), and a SIGTERM then must
// release them, not kill the process as Node's default does. It stops what has started.
const stops: Array<() => void> = [];
onStopSignal((signal) => {
  logger().info({ signal }, "worker stopping: finishing in-flight jobs");
  for (const stop of stops) stop();
  stopWorker()
    .then(closeDb)
    .then(() => process.exit(0))
    .catch((error) => {
      logger().error({ err: error }, "worker stop failed");
      process.exit(1);
    });
});

env();
await resolveDatabaseUrl();
await migrate(db());
await startWorker();
collectProcessMetrics();
registerDatabaseGauges();
const metricsServer = await startMetricsServer();
stops.push(() => metricsServer?.close());
stops.push(await startSampler());
stops.push(startRecorder(), startEngineWatch(), startSleepWatch(), startPlatformWatch());
// Existing gateways reach the AI endpoint at once after a restart, not at the next reconcile.
ensureNetwork().catch((error: unknown) =>
  logger().warn({ err: error }, "gateways' network not ready at start"),
);
// The warm pool fills now, not at its cron's next minute: a new installation's (or a restarted
// worker's) first provisioning adopts a gateway instead of booting one. Workers starting
// together send one each; the fill's advisory lock lets one of them run.
// (In a promise: a runtime that cannot be set up fails the fill, not the worker's start.)
Promise.resolve()
  .then(() => (poolSize() > 0 ? sendJob("fill-pool", {}) : undefined))
  .catch((error: unknown) => logger().warn({ err: error }, "warm pool fill not queued at start"));
