import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { env } from "../app/server/platform/env.server.ts";
import { logger } from "../app/server/platform/logger.server.ts";
import { isMetricsPath, serveMetrics } from "../app/server/platform/metrics/endpoint.server.ts";

// A worker's own /metrics (docs/decisions/0202): workers have no HTTP port of their own, so one
// is opened for Prometheus when WORKER_METRICS_PORT is set — on loopback unless
// WORKER_METRICS_HOST says otherwise — answering with the web's rules (METRICS_TOKEN).

/** Starts the listener when configured; resolves with it (undefined when off). */
export async function startMetricsServer(): Promise<Server | undefined> {
  const { WORKER_METRICS_PORT: port, WORKER_METRICS_HOST: host } = env();
  if (port === undefined) return undefined;
  const server = createServer((req, res) => {
    if (!isMetricsPath(req.url)) {
      res.writeHead(404, { "content-type": "application/json; charset=utf-8" });
      res.end(JSON.stringify({ error: "Not found" }));
      return;
    }
    serveMetrics(req, res).catch((error: unknown) => {
      logger().error({ err: error }, "metrics answer failed");
      res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port: listening } = server.address() as AddressInfo;
  logger().info({ listening: `${host}:${listening}` }, "worker metrics listening");
  return server;
}
