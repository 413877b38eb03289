import { env } from "../app/server/platform/env.server.ts";
import { logger } from "../app/server/platform/logger.server.ts";
import { sampleAll } from "./instances.ts";
import { getRuntime } from "./runtime/index.ts";

/**
 * Records every instance's observed state and live figures (CPU, memory, pids) into its row
 * every INSTANCE_SAMPLE_INTERVAL_MS, so the web answers /stats and GET without Docker.
 * Logs which runtime driver is active and whether its engine answers. Returns a stop function.
 */
export async function startSampler(): Promise<() => void> {
  const runtime = getRuntime();
  try {
    await runtime.ping();
    logger().info({ driver: runtime.driver }, "agent runtime: %s engine answers", runtime.driver);
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
