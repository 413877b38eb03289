import { log, rt } from "./engine.ts";
import { attachPlatformToGatewayNetworks } from "./gateway-networks.ts";

// On Swarm the platform's containers join every gateway's overlay (decision 0201). Reconcile
// does it once a minute; a web replica started since (a rollout, a drained node's replica
// rescheduled) would reach no gateway for that long, and the gateways whose overlay's host
// address its predecessor held would reach no model. So each worker lists the running platform
// containers every few seconds (one call per node) and joins them at once when the set changed:
// a new replica is joined before its health check passes (10 s), so before traffic reaches it.

/** How often the platform containers are listed. */
export const PLATFORM_WATCH_MS = 3_000;

/**
 * One pass: joins the platform containers to the gateway overlays when their set differs from
 * `last` (the set the previous successful pass joined); returns the set now joined.
 */
export async function watchPlatformOnce(last: string | undefined): Promise<string | undefined> {
  const runtime = rt();
  if (!runtime.platformContainers) return last;
  const now = (await runtime.platformContainers()).sort().join(",");
  if (now === last) return last;
  const made = await attachPlatformToGatewayNetworks();
  log().info(
    { containers: now.split(",").length, connections: made },
    "platform containers changed",
  );
  return now;
}

/** Starts the watch where the driver has platform containers (Swarm); returns a stop function. */
export function startPlatformWatch(every = PLATFORM_WATCH_MS): () => void {
  if (!rt().platformContainers) return () => {};
  let last: string | undefined;
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    watchPlatformOnce(last)
      .then((joined) => {
        last = joined;
      })
      .catch((error: unknown) => log().warn({ err: error }, "platform container watch failed"))
      .finally(() => {
        running = false;
      });
  }, every);
  timer.unref();
  return () => clearInterval(timer);
}
