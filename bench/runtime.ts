import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { startCluster, withDatabase } from "../app/server/platform/embedded-postgres.server.ts";
import { removeRunObjects } from "./docker-run.ts";

// `npm run bench:runtime` (also the last part of `npm run bench`): the agent runtime against a
// bare `docker run` of the same image, same run, one gateway at a time at 1 CPU:
// provision-to-healthy (and to paired/ready), stop/start/restart latency, idle memory.
// Skipped with a message when no Docker engine answers or the image is not built.

const run = `bench-${randomBytes(3).toString("hex")}`;
const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-bench-runtime-"));
process.env.LOG_LEVEL ??= "silent";
process.env.DATA_DIR = dataDir;
process.env.RUNTIME_DEPLOYMENT = run;
process.env.RUNTIME_NETWORK = `agent-${run}`;
process.env.RUNTIME_MAX_CPUS = "1";

const { DockerRuntime } = await import("../worker/runtime/docker.ts");
const { setRuntime } = await import("../worker/runtime/index.ts");
const image = process.env.AGENT_GATEWAY_IMAGE ?? "agent-gateway:2026.9.6";
const rt = new DockerRuntime({ maxCpus: 1 });
const skip = await rt
  .ping()
  .then(async () => ((await rt.imageExists(image)) ? undefined : `image ${image} is not built`))
  .catch((error: Error) => `no Docker engine (${error.message})`);

if (skip) {
  console.warn(`\nagent runtime benchmark skipped: ${skip}`);
} else {
  setRuntime(rt);
  const base = existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir();
  const cluster = await startCluster({
    dir: path.join(base, `agent-bench-runtime-pg-${process.pid}`),
    settings: { fsync: "off", synchronous_commit: "off" },
  });
  const admin = postgres(cluster.url, { max: 1, onnotice: () => {} });
  await admin.unsafe("create database bench_runtime");
  await admin.end();
  process.env.DATABASE_URL = withDatabase(cluster.url, "bench_runtime");
  const { db, closeDb } = await import("../app/server/platform/db.server.ts");
  const { migrate } = await import("../db/migrate.ts");
  await migrate(db());
  const { ensureInstanceRecord, getInstance } = await import(
    "../app/server/agents/instances.server.ts"
  );
  const w = await import("../worker/instances.ts");
  const { gatewayHealthy } = await import("../app/server/agents/gateway-client.server.ts");

  const rows: Array<[string, string]> = [];
  const mib = (n: number) => `${(n / 1024 ** 2).toFixed(0)} MiB`;
  const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const untilHealthy = async (address: string) => {
    while (!(await gatewayHealthy(address, 2_000))) await new Promise((r) => setTimeout(r, 200));
  };
  try {
    const { gatewayIp } = await rt.ensureNetwork(process.env.RUNTIME_NETWORK as string, {
      [w.DEPLOYMENT_LABEL]: run,
    });
    void gatewayIp;
    // 1. bare docker run of the same image: token only, same network, same CPU cap.
    let t = Date.now();
    const bare = await rt.docker.createContainer({
      Image: image,
      Env: [`OPENCLAW_GATEWAY_TOKEN=${randomBytes(32).toString("hex")}`],
      Labels: { [w.DEPLOYMENT_LABEL]: run },
      HostConfig: {
        NetworkMode: process.env.RUNTIME_NETWORK,
        NanoCpus: 1e9,
        Init: true,
      },
    });
    await bare.start();
    const bareInfo = await rt.inspect(bare.id);
    await untilHealthy(`${bareInfo?.address}:18789`);
    const bareMs = Date.now() - t;
    await new Promise((r) => setTimeout(r, 10_000));
    const bareMem = (await rt.stats(bare.id)).memoryBytes;
    await bare.remove({ force: true, v: true });

    // 2. provision (cold: empty volume): config, hardened container, healthy, paired.
    const row = await ensureInstanceRecord(`usr_${run}`, { plan: "solo" });
    const p = (await w.provision(row.id)) as { healthyMs: number; readyMs: number };
    await new Promise((r) => setTimeout(r, 10_000));
    const current = (await getInstance(row.id)) as NonNullable<
      Awaited<ReturnType<typeof getInstance>>
    >;
    const idleMem = (await rt.stats(current.container_name)).memoryBytes;

    // 3. stop, start (to healthy), restart (to healthy), through the worker's actions.
    t = Date.now();
    await w.runAction(current, "stop");
    const stopMs = Date.now() - t;
    t = Date.now();
    await w.runAction((await getInstance(row.id)) as typeof current, "start");
    const startCallMs = Date.now() - t;
    const afterStart = await rt.inspect(current.container_name);
    await untilHealthy(`${afterStart?.address}:18789`);
    const startHealthyMs = Date.now() - t;
    t = Date.now();
    await w.runAction((await getInstance(row.id)) as typeof current, "restart");
    const restartCallMs = Date.now() - t;
    const afterRestart = await rt.inspect(current.container_name);
    await untilHealthy(`${afterRestart?.address}:18789`);
    const restartHealthyMs = Date.now() - t;
    await w.teardown(current.user_id);

    rows.push(
      ["bare docker run → /healthz", secs(bareMs)],
      [
        "provision (cold) → /healthz",
        `${secs(p.healthyMs)} (${(p.healthyMs / bareMs).toFixed(2)}× bare)`,
      ],
      [
        "provision (cold) → paired, ready",
        `${secs(p.readyMs)} (${(p.readyMs / bareMs).toFixed(2)}× bare)`,
      ],
      ["stop (worker action)", secs(stopMs)],
      ["start: action / → /healthz", `${secs(startCallMs)} / ${secs(startHealthyMs)}`],
      ["restart: action / → /healthz", `${secs(restartCallMs)} / ${secs(restartHealthyMs)}`],
      [
        "idle memory 10 s after healthy",
        `${mib(idleMem)} (bare ${mib(bareMem)}, ${(idleMem / bareMem).toFixed(2)}×)`,
      ],
    );
  } finally {
    await removeRunObjects(rt, w.DEPLOYMENT_LABEL, run, process.env.RUNTIME_NETWORK as string);
    await closeDb();
    await cluster.stop();
    await rm(cluster.dir, { recursive: true, force: true });
  }
  console.warn(
    `\nAgent runtime (${image}, 1 CPU per gateway, ${os.cpus().length} cores, load ${os.loadavg()[0]?.toFixed(1)})\n`,
  );
  for (const [k, v] of rows) console.warn(`${k.padEnd(36)} ${v}`);
}
await rm(dataDir, { recursive: true, force: true });
