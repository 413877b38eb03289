import { env } from "../app/server/platform/env.server.ts";
import { logger } from "../app/server/platform/logger.server.ts";
import { sampleAll } from "./instances.ts";
import { selectRuntime } from "./runtime/index.ts";
import { installOpenclaw, PINNED_OPENCLAW, resolveOpenclaw } from "./runtime/openclaw-install.ts";

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
