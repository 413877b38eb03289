import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
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

// `npm run bench` (after the runtime part; BENCH_SLEEP=0 skips it): scale-to-zero (decisions
// 0164, 0178, 0183). One gateway at 1 CPU; for each way of putting it to sleep tried (paused,
// frozen into swap, stopped), the memory it holds asleep (and what compressed swap keeps of it
// in RAM) and the time from a web chat (POST /api/agent on the real web process, the worker's
// jobs run in this process) to its reply. Skipped with a message when no Docker engine answers,
// the image is not built, or the web is not built (`npm run build`).

/** Whether the kernel has zswap in front of swap (decision 0183). */
const zswapEnabled = async () =>
  (await readFile("/sys/module/zswap/parameters/enabled", "utf8").catch(() => "N")).startsWith("Y");
const run = `bench-sleep-${randomBytes(3).toString("hex")}`;
const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-bench-sleep-"));
process.env.LOG_LEVEL ??= "silent";
process.env.DATA_DIR = dataDir;
process.env.RUNTIME_DEPLOYMENT = run;
process.env.RUNTIME_NETWORK = `agent-${run}`;
process.env.RUNTIME_MAX_CPUS = "1";
process.env.SLEEP_WATCH_INTERVAL_MS = "0";
process.env.SLEEP_IDLE_SECONDS = "0";
process.env.SLEEP_CRON = "0 0 1 1 *"; // the bench puts the agent to sleep itself
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
  const { ensureInstanceRecord } = await import("../app/server/agents/instances.server.ts");
  const { createSession } = await import("../app/server/accounts/sessions.server.ts");
  const { DEPLOYMENT_LABEL } = await import("../worker/instances/engine.ts");
  const { provision } = await import("../worker/instances/provision.ts");
  const { sleepIdleInstances } = await import("../worker/instances/sleep.ts");
  const { startWorker, stopWorker } = await import("../worker/jobs/worker.ts");
  const volumes: string[] = [];
  const children: Child[] = [];
  const rows: Array<[string, string]> = [];
  const mib = (n: number) => `${(n / 1024 ** 2).toFixed(0)} MiB`;
  const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const memoryOf = (name: string) => rt.stats(name).then((s) => s.memoryBytes);
  /** What the container has in swap: cgroup v1's memory+swap less memory (on this host). */
  const swapOf = async (name: string) => {
    const id = (await rt.inspect(name))?.id;
    const read = (file: string) =>
      readFile(`/sys/fs/cgroup/memory/docker/${id}/${file}`, "utf8").then(Number);
    return (await read("memory.memsw.usage_in_bytes")) - (await read("memory.usage_in_bytes"));
  };
  /**
   * What compressed swap holds in the host's RAM: zswap's pool (/proc/meminfo) and zram
   * devices' memory. A sleeper swapped there still costs that much RAM until it is written back
   * to disk (decision 0183). Undefined when the host has neither.
   */
  const compressedSwapBytes = async () => {
    const meminfo = await readFile("/proc/meminfo", "utf8").catch(() => "");
    const zswapKb = /^Zswap:\s+(\d+) kB/m.exec(meminfo)?.[1];
    const zswapOn = await zswapEnabled();
    const zram = (await readFile("/proc/swaps", "utf8").catch(() => ""))
      .split("\n")
      .map((line) => /^\/dev\/(zram\d+)\s/.exec(line)?.[1])
      .filter((d): d is string => d !== undefined);
    if (!zswapOn && zram.length === 0) return undefined;
    let total = zswapOn ? Number(zswapKb ?? 0) * 1024 : 0;
    for (const d of zram) {
      const stat = await readFile(`/sys/block/${d}/mm_stat`, "utf8").catch(() => "");
      total += Number(stat.trim().split(/\s+/)[2] ?? 0); // mem_used_total
    }
    return total;
  };
  /** The last wake's steps, each as time since the run began (instance_progress). */
  const wakeSteps = async (instanceId: string) => {
    const steps = await db()<{ step: string; ms: number }[]>`
      select p.step, extract(epoch from p.at - r.started_at) * 1000 as ms
      from instance_progress p join instance_runs r on r.id = p.run_id
      where r.instance_id = ${instanceId} and r.action = 'wake'
      order by p.at`;
    return steps.map((s) => `${s.step} ${secs(Number(s.ms))}`).join(", ");
  };
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
    volumes.push(row.volume_name);
    await provision(row.id);
    const name = row.container_name;
    await postAgent({ message: "warm up" });
    let t = Date.now();
    await postAgent({ message: "awake" });
    rows.push(["awake: a reply", secs(Date.now() - t)]);
    await new Promise((r) => setTimeout(r, 10_000));
    rows.push(["awake: memory, idle", mib(await memoryOf(name))]);

    // 1. docker pause alone: the memory stays resident; a wake is an unpause.
    await rt.docker.getContainer(name).pause();
    rows.push(["paused: memory", mib(await memoryOf(name))]);
    t = Date.now();
    await rt.docker.getContainer(name).unpause();
    await postAgent({ message: "after a pause" });
    rows.push(["paused: unpause → reply", secs(Date.now() - t)]);

    /** Puts the agent to sleep the given way, then a web chat wakes it (wake-instance job). */
    const sleepAndWake = async (mode: "freeze" | "stop", label: string) => {
      process.env.AGENT_SLEEP_MODE = mode;
      resetEnvCache();
      const compressedBefore = await compressedSwapBytes();
      const result = await sleepIdleInstances();
      if (result[row.id] !== "sleeping") throw new Error(`not asleep: ${result[row.id]}`);
      const seen = await rt.inspect(name);
      const resident = seen?.state === "paused" ? await memoryOf(name) : 0;
      rows.push([`${label}: memory resident`, mib(resident)]);
      if (seen?.state === "paused") {
        const swapped = await swapOf(name);
        const compressed = await compressedSwapBytes();
        rows.push([
          `${label}: memory in swap`,
          compressed === undefined
            ? `${mib(swapped)} (on disk)`
            : `${mib(swapped)}, compressed in RAM: ${mib(compressed - (compressedBefore ?? 0))}`,
        ]);
      }
      t = Date.now();
      await postAgent({ message: `after a sleep (${mode})` }).catch(async (error: Error) => {
        // What the woken gateway was doing when the chat failed.
        const logs = await rt.logs(name, { tail: 40 }).catch(() => "(no logs)");
        throw new Error(`${error.message}\n--- the gateway's last lines:\n${logs}`);
      });
      const wakeMs = Date.now() - t;
      rows.push([
        `${label}: chat → woken → reply`,
        `${secs(wakeMs)} (target 3 s: ${wakeMs <= 3_000 ? "met" : "MISSED"})`,
      ]);
      rows.push([`${label}: the wake's steps`, await wakeSteps(row.id)]);
      if (process.env.BENCH_SLEEP_LOGS) console.warn(await rt.logs(name, { tail: 60 }));
      t = Date.now();
      await postAgent({ message: "and again" });
      rows.push([`${label}: the next reply`, secs(Date.now() - t)]);
      rows.push([`${label}: memory right after`, mib(await memoryOf(name))]);
    };

    // 2. The platform's sleep where the host has swap (decision 0178): frozen into swap.
    try {
      await sleepAndWake("freeze", "frozen to swap");
    } catch (error) {
      if (!(error as Error).message.includes("not asleep")) throw error;
      rows.push(["frozen to swap", `not available here: ${(error as Error).message}`]);
    }
    // 3. The platform's sleep elsewhere: the container stopped, a wake is a boot.
    await sleepAndWake("stop", "stopped");
  } finally {
    await stopWorker(5_000).catch(() => {});
    await Promise.all(children.map((c) => c.stop()));
    await removeRunObjects(
      rt,
      DEPLOYMENT_LABEL,
      run,
      process.env.RUNTIME_NETWORK as string,
      volumes,
    );
    await closeDb();
    await cluster.stop();
    await rm(cluster.dir, { recursive: true, force: true });
  }
  // The host's swap decides what a frozen sleeper costs (decision 0178): say which it was.
  const swaps = (await readFile("/proc/swaps", "utf8").catch(() => ""))
    .trim()
    .split("\n")
    .slice(1)
    .map((line) => line.split(/\s+/).slice(0, 2).join(" "));
  const pageCluster = await readFile("/proc/sys/vm/page-cluster", "utf8").catch(() => "?");
  const zswap = (await zswapEnabled())
    ? `zswap (${(await readFile("/sys/module/zswap/parameters/compressor", "utf8")).trim()}) in front`
    : "no zswap";
  console.warn(
    `\nScale-to-zero (${image}, 1 CPU per gateway, ${os.cpus().length} cores, load ${os.loadavg()[0]?.toFixed(1)}; swap: ${swaps.join(", ") || "none"}, ${zswap}, vm.page-cluster ${pageCluster.trim()})\n`,
  );
  for (const [k, v] of rows) console.warn(`${k.padEnd(40)} ${v}`);
}
await rm(dataDir, { recursive: true, force: true });
