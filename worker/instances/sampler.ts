import {
  type InstanceRow,
  listInstances,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { logger } from "../../app/server/platform/logger.server.ts";
import { selectRuntime } from "../runtime/index.ts";
import { installOpenclaw, PINNED_OPENCLAW, resolveOpenclaw } from "../runtime/openclaw-install.ts";
import { healIfDown } from "./crash-watch.ts";
import { isUnavailable, log, rt } from "./engine.ts";
import { observe } from "./observe.ts";
import { prepareStorage } from "./storage-setup.ts";

/** Writes one live sample (stats) of a running instance into its row. */
async function sample(row: InstanceRow): Promise<void> {
  if (!row.container_id) return;
  const info = await rt().inspect(row.container_id);
  if (!info?.running) return;
  const s = await rt().stats(info.id);
  await updateInstance(row.id, {
    cpu_percent: s.cpuPercent,
    memory_bytes: s.memoryBytes,
    memory_limit_bytes: s.memoryLimitBytes,
    pids: s.pids,
    network_rx_bytes: s.rxBytes,
    network_tx_bytes: s.txBytes,
    sampled_at: new Date(),
  });
}

/** Live samples for every instance with a container (the worker runs this every few seconds). */
export async function sampleAll(): Promise<number> {
  let n = 0;
  for (const row of await listInstances()) {
    if (!row.container_id) continue;
    try {
      const seen = await observe(row);
      await healIfDown(seen); // a crash is restarted in seconds, not at reconcile's minute
      await sample(seen);
      n++;
    } catch (error) {
      if (isUnavailable(error)) throw error;
      log().warn({ err: error, instanceId: row.id }, "sampling failed");
    }
  }
  return n;
}

/**
 * Records every instance's observed state and live figures (CPU, memory, pids) into its row
 * every INSTANCE_SAMPLE_INTERVAL_MS, so the web answers /stats and GET without Docker.
 * Logs which runtime driver is active and whether its engine answers. Returns a stop function.
 */
export async function startSampler(): Promise<() => void> {
  const { runtime, reason } = await selectRuntime();
  logger().info(
    { driver: runtime.driver },
    "agent runtime: %s driver (%s)",
    runtime.driver,
    reason,
  );
  await prepareStorage(runtime);
  if (
    runtime.driver === "process" &&
    env().NODE_ENV !== "test" &&
    !resolveOpenclaw(PINNED_OPENCLAW)
  ) {
    // A laptop without Docker: fetch the pinned gateway once, in the background.
    installOpenclaw((line) => logger().info(line)).then(
      (dir) => logger().info({ dir }, "OpenClaw installed for the process driver"),
      (error) => logger().error({ err: error }, "OpenClaw could not be installed"),
    );
  }
  try {
    await runtime.ping();
  } catch (error) {
    logger().warn(
      { driver: runtime.driver, err: error },
      "agent runtime: the %s engine does not answer; instance jobs will fail until it does",
      runtime.driver,
    );
  }
  const every = env().INSTANCE_SAMPLE_INTERVAL_MS;
  if (every <= 0) return () => {};
  let running = false;
  let warned = false;
  const timer = setInterval(() => {
    if (running) return; // a slow pass (stats take ~1 s per container) is never doubled
    running = true;
    sampleAll()
      .then(() => {
        warned = false;
      })
      .catch((error) => {
        if (!warned) logger().warn({ err: error }, "instance sampling failed");
        warned = true;
      })
      .finally(() => {
        running = false;
      });
  }, every);
  timer.unref();
  return () => clearInterval(timer);
}
