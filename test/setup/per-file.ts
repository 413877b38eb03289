import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, inject } from "vitest";
import { closeDb } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { stopBoss } from "../../app/server/platform/jobs.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { mswServer } from "../msw/server.ts";
import { cloneDatabase } from "./cluster.ts";
import { keepEngineOutOfMsw } from "./engine-connections.ts";

// Every test file gets its own database (a clone of the migrated template), its own data
// folder, and strict msw interception.
const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-platform-data-"));
process.env.NODE_ENV = "test";
process.env.LOG_LEVEL ??= "silent";
process.env.DATA_DIR = dataDir;
// Most files provision gateways with no model endpoint reachable; the dry run at cold
// provisioning is tested where there is one (test/agents/warm-pool.test.ts).
process.env.RUNTIME_COLD_WARMUP ??= "off";
// No warm-pool gateways unless a test asks for them (unset, a worker on a roomy Docker host keeps one).
process.env.RUNTIME_POOL_SIZE ??= "0";
delete process.env.SMTP_URL;
// Without a payment processor every user would have the self-hosted default plan; files that
// test plans from subscriptions keep today's gate, and self-hosted tests set it themselves.
process.env.DEFAULT_PLAN ??= "none";
// Files write users, keys and sessions behind the services' backs and read them back through the
// API at once; the credential cache (whose invalidation is asynchronous across connections) is
// tested on its own in test/accounts/credential-cache.test.ts.
process.env.CREDENTIAL_CACHE ??= "off";
// The Control UI device sweep runs when a test asks for it (control-ui.e2e), not on a cron tick
// that lands in the middle of another test's pairing.
process.env.CONTROL_UI_SWEEP_CRON ??= "0 0 1 1 *";
// Likewise the hourly sweep of gateways' temporary folders (a test runs it itself).
process.env.TMP_SWEEP_CRON ??= "0 0 1 1 *";
process.env.DATABASE_URL = await cloneDatabase(inject("adminDatabaseUrl"));
resetEnvCache();

beforeAll(() => {
  mswServer.listen({ onUnhandledFrame: "error" });
  keepEngineOutOfMsw();
});

afterAll(async () => {
  mswServer.close();
  await stopBoss({ graceful: false });
  await closeDb();
  resetRateLimiters();
  await rm(dataDir, { recursive: true, force: true });
});
