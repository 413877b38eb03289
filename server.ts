import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { ServerBuild } from "@remix-run/node";
import { agentIngressAuthority } from "./app/server/agents/agent-ingress.server.ts";
import { liveSocketUpgrade } from "./app/server/agents/live-socket.server.ts";
import { flushMetering, recoverMeteringJournals } from "./app/server/ai/metering.server.ts";
import { registerDatabaseGauges } from "./app/server/ops/prometheus.server.ts";
import { closeDb, db, resolveDatabaseUrl } from "./app/server/platform/db.server.ts";
import { env } from "./app/server/platform/env.server.ts";
import { ensureQueueSchema } from "./app/server/platform/jobs.server.ts";
import { logger } from "./app/server/platform/logger.server.ts";
import { collectProcessMetrics } from "./app/server/platform/metrics/registry.server.ts";
import { openFilesLimit, WEB_OPEN_FILES_WANTED } from "./app/server/platform/open-files.server.ts";
import { beginShutdown } from "./app/server/platform/shutdown.server.ts";
import { onStopSignal } from "./app/server/platform/supervisor.server.ts";
import { gracefulStop } from "./app/server/platform/web/graceful-stop.server.ts";
import { createIngress } from "./app/server/platform/web/ingress-proxy.server.ts";
import { createWebServer } from "./app/server/platform/web/web-server.server.ts";
import { migrate } from "./db/migrate.ts";

// The web process: `npm run start:web` (production) or started by `npm start`.
const root = path.dirname(fileURLToPath(import.meta.url));
const config = env();
await resolveDatabaseUrl();
await migrate(db());
await ensureQueueSchema();
await closeDb();

collectProcessMetrics();
registerDatabaseGauges();
// Calls a web process killed before its usage write had answered (decision 0245): in the
// background, since a database still away only delays them.
void recoverMeteringJournals().catch((error: unknown) =>
  logger().error({ err: error }, "the metering journals of stopped processes were not replayed"),
);
const build = (await import(pathToFileURL(path.join(root, "build/index.js")).href)) as ServerBuild;
const server = createWebServer({
  build,
  publicDir: path.join(root, "public"),
  apiFastPath: process.env.API_FAST_PATH !== "0",
  // Agents' own addresses (<id>.<AGENTS_DOMAIN>, /agents/<id>/ui/) to their gateways.
  ingress: createIngress(agentIngressAuthority, {
    perUser: config.INGRESS_CONNECTIONS_PER_USER,
    perAgent: config.INGRESS_CONNECTIONS_PER_AGENT,
  }),
  // The live agent socket (ws://<host>/agent/<user_id>) shares the web server's port.
  upgrade: liveSocketUpgrade,
});
server.keepAliveTimeout = 65_000;
server.listen(config.PORT, config.HOST, () => {
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : config.PORT;
  // APP_URL is the address to open: mail links, wallet sign-in and security keys name it.
  // Each open connection holds a descriptor (Node has already raised the soft limit to the hard
  // one); too low a hard limit is said at start rather than found as EMFILE under load.
  const openFiles = openFilesLimit();
  logger().info(
    { url: config.APP_URL, listening: `${config.HOST}:${port}`, openFiles },
    "web listening",
  );
  if (openFiles && openFiles.soft < WEB_OPEN_FILES_WANTED) {
    logger().warn(
      { openFiles, wanted: WEB_OPEN_FILES_WANTED },
      "the open-files limit caps the connections this web process can hold: raise its hard limit (LimitNOFILE, --ulimit nofile; docs/operations.md)",
    );
  }
});

const stop = gracefulStop(server);
onStopSignal((signal) => {
  logger().info({ signal }, "web stopping");
  beginShutdown(); // requests awaiting a job answer now with what is known

  // In-flight answers finish (10 s at most; kept-alive connections close as their answers end),
  // then their usage is settled and credit leases given back, on either path. Within the
  // supervisor's 15 s.
  void stop({ graceMs: 10_000, flush: flushMetering, flushTimeoutMs: 4_000 }).then((outcome) => {
    logger().info({ outcome }, "web stopped");
    process.exit(0);
  });
});
