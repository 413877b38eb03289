import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import {
  freePort,
  startCluster,
  withDatabase,
} from "../app/server/platform/embedded-postgres.server.ts";
import { removeRunObjects } from "./docker-run.ts";
import { agentPoster, type Child, root, startNode } from "./servers.ts";

// `npm run bench` (after the runtime part; BENCH_SLEEP=0 skips it): scale-to-zero (decision
// 0164). One gateway at 1 CPU; for each way of putting it to sleep tried, the memory it holds
// asleep and the time from a web chat (POST /api/agent on the real web process, the worker's
// jobs run in this process) to its reply. Skipped with a message when no Docker engine answers,
// the image is not built, or the web is not built (`npm run build`).

const run = `bench-sleep-${randomBytes(3).toString("hex")}`;
const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-bench-sleep-"));
process.env.LOG_LEVEL ??= "silent";
process.env.DATA_DIR = dataDir;
process.env.RUNTIME_DEPLOYMENT = run;
process.env.RUNTIME_NETWORK = `agent-${run}`;
process.env.RUNTIME_MAX_CPUS = "1";
process.env.SLEEP_WATCH_INTERVAL_MS = "0";
process.env.SLEEP_IDLE_SECONDS = "0";
process.env.SEALING_KEY = randomBytes(32).toString("hex");
process.env.SESSION_SECRET = randomBytes(32).toString("hex");

const { DockerRuntime } = await import("../worker/runtime/docker.ts");
const { setRuntime } = await import("../worker/runtime/index.ts");
const image = process.env.AGENT_GATEWAY_IMAGE ?? "agent-gateway:2026.9.6";
const rt = new DockerRuntime({ maxCpus: 1 });
const skip = await rt
  .ping()
  .then(async () => {
    if (!(await rt.imageId(image))) return `image ${image} is not built`;
    return existsSync(path.join(root, "build/index.js")) ? undefined : "run `npm run build` first";
  })
  .catch((error: Error) => `no Docker engine (${error.message})`);

if (skip) {
  console.warn(`\nscale-to-zero benchmark skipped: ${skip}`);
} else {
  setRuntime(rt);
  const base = existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir();
  const cluster = await startCluster({
    dir: path.join(base, `agent-bench-sleep-pg-${process.pid}`),
    settings: { fsync: "off", synchronous_commit: "off" },
  });
  const admin = postgres(cluster.url, { max: 1, onnotice: () => {} });
  await admin.unsafe("create database bench_sleep");
  await admin.end();
  const databaseUrl = withDatabase(cluster.url, "bench_sleep");
  process.env.DATABASE_URL = databaseUrl;
  const { db, closeDb } = await import("../app/server/platform/db.server.ts");
  const { migrate } = await import("../db/migrate.ts");
  await migrate(db());
  const { resetEnvCache } = await import("../app/server/platform/env.server.ts");
  const { ensureInstanceRecord, getInstance } = await import(
    "../app/server/agents/instances.server.ts"
  );
  const { createSession } = await import("../app/server/accounts/sessions.server.ts");
  const { DEPLOYMENT_LABEL } = await import("../worker/instances/engine.ts");
  const { provision } = await import("../worker/instances/provision.ts");
  const { sleepIdleInstances } = await import("../worker/instances/sleep.ts");
  const { startWorker, stopWorker } = await import("../worker/jobs/worker.ts");
  const children: Child[] = [];
  const rows: Array<[string, string]> = [];
  const mib = (n: number) => `${(n / 1024 ** 2).toFixed(0)} MiB`;
  const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const memoryOf = (name: string) => rt.stats(name).then((s) => s.memoryBytes);
  try {
    const { gatewayIp } = await rt.ensureNetwork(process.env.RUNTIME_NETWORK as string, {
      [DEPLOYMENT_LABEL]: run,
    });
    const provider = await startNode("bench/fake-openai.ts", await freePort(), "/v1/models");
    children.push(provider);
    const port = await freePort();
    const web = await startNode("server.ts", port, "/api/health", {
      HOST: "0.0.0.0",
      DATABASE_URL: databaseUrl,
      OPENAI_BASE_URL: `${provider.url}/v1`,
      OPENAI_API_KEY: "bench",
      SEALING_KEY: process.env.SEALING_KEY as string,
      SESSION_SECRET: process.env.SESSION_SECRET as string,
      RATE_LIMIT_SCALE: "1000",
      AGENT_CHAT_START_WAIT_MS: "300000",
    });
    children.push(web);
    process.env.RUNTIME_PLATFORM_AI_URL = `http://${gatewayIp}:${port}/api/ai/v1`;
    resetEnvCache();
    await startWorker(); // the wake-instance job the web enqueues

    const userId = `usr_${run.replace(/-/g, "_")}`;
    await db()`insert into users (id, email, name, referral_code)
      values (${userId}, ${`${run}@example.com`}, 'bench', ${run
        .replace(/[^a-z0-9]/gi, "")
        .slice(-20)
        .toUpperCase()})`;
    await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason)
      values (${`led_${run}`}, ${userId}, ${1_000_000_000}, 'bench')`;
    await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
      values (${`agt_${randomBytes(10).toString("hex")}`}, ${userId}, 'Bench', 'main',
              'openai/gpt-4o-mini', 'starter')`;
    const cookie = (await createSession(userId)).setCookie.split(";")[0] as string;
    const postAgent = agentPoster(web.url, cookie);
    const row = await ensureInstanceRecord(userId, { plan: "solo", model: "openai/gpt-4o-mini" });
    await provision(row.id);
    const name = row.container_name;
    await postAgent({ message: "warm up" });
    let t = Date.now();
    await postAgent({ message: "awake" });
    rows.push(["awake: a reply", secs(Date.now() - t)]);
    await new Promise((r) => setTimeout(r, 10_000));
    rows.push(["awake: memory, idle", mib(await memoryOf(name))]);

    // 1. docker pause (frozen): no swap here, so the memory stays; wake is an unpause.
    await rt.docker.getContainer(name).pause();
    rows.push(["paused: memory", mib(await memoryOf(name))]);
    t = Date.now();
    await rt.docker.getContainer(name).unpause();
    await postAgent({ message: "after a pause" });
    rows.push(["paused: unpause → reply", secs(Date.now() - t)]);

    // 2. what the platform does: the container stopped, woken by the chat (wake-instance job).
    const result = await sleepIdleInstances();
    if (result[row.id] !== "sleeping") throw new Error(`not asleep: ${result[row.id]}`);
    const asleep = (await rt.inspect(name))?.running ? await memoryOf(name) : 0;
    rows.push(["stopped (the platform's sleep): memory", mib(asleep)]);
    t = Date.now();
    await postAgent({ message: "after a sleep" }).catch(async (error: Error) => {
      // What the woken gateway was doing when the chat failed.
      const logs = await rt.logs(name, { tail: 40 }).catch(() => "(no logs)");
      throw new Error(`${error.message}\n--- the gateway's last lines:\n${logs}`);
    });
    const wakeMs = Date.now() - t;
    rows.push([
      "stopped: chat → woken → reply",
      `${secs(wakeMs)} (target 3 s: ${wakeMs <= 3_000 ? "met" : "MISSED"})`,
    ]);
    t = Date.now();
    await postAgent({ message: "and again" });
    rows.push(["stopped: the next reply", secs(Date.now() - t)]);
    const woken = await getInstance(row.id);
    rows.push(["woken: memory right after", mib(await memoryOf(woken?.container_name ?? name))]);
    // 3. A pooled gateway taking over the sleeper's volume: not built (decision 0164).
    rows.push(["pool takeover of the state volume", "not built (decision 0164)"]);
  } finally {
    await stopWorker(5_000).catch(() => {});
    await Promise.all(children.map((c) => c.stop()));
    await removeRunObjects(rt, DEPLOYMENT_LABEL, run, process.env.RUNTIME_NETWORK as string);
    await closeDb();
    await cluster.stop();
    await rm(cluster.dir, { recursive: true, force: true });
  }
  console.warn(
    `\nScale-to-zero (${image}, 1 CPU per gateway, ${os.cpus().length} cores, load ${os.loadavg()[0]?.toFixed(1)})\n`,
  );
  for (const [k, v] of rows) console.warn(`${k.padEnd(40)} ${v}`);
}
await rm(dataDir, { recursive: true, force: true });
