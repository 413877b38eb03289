import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { freePort } from "../app/server/platform/embedded-postgres.server.ts";
import { startBenchDatabase } from "./bench-database.ts";
import { removeRunObjects } from "./docker-run.ts";
import { agentPoster, type Child, root, startNode } from "./servers.ts";

// `npm run bench:runtime` (also the last part of `npm run bench`): the agent runtime against a
// bare `docker run` of the same image, same run, one gateway at a time at 1 CPU:
// provision-to-healthy (and to paired/ready), stop/start/restart latency, idle memory; then the
// warm pool: provision-instance start → the tenant's first chat reply (POST /api/agent on the
// real web process, whose model endpoint is answered by the local fake provider), target 3 s.
// Skipped with a message when no Docker engine answers or the image is not built; the warm-pool
// part needs `npm run build` (the web process).

const run = `bench-${randomBytes(3).toString("hex")}`;
const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-bench-runtime-"));
process.env.LOG_LEVEL ??= "silent";
process.env.DATA_DIR = dataDir;
process.env.RUNTIME_DEPLOYMENT = run;
process.env.RUNTIME_NETWORK = `agent-${run}`;
process.env.RUNTIME_MAX_CPUS = "1";
// The cold figures compare the platform's provisioning with a bare `docker run`; the dry run at
// cold provisioning is measured on its own in part 4, where the web process answers it.
process.env.RUNTIME_COLD_WARMUP = "off";
// The bench seals the instance's secrets and signs the session; the web process reads them.
process.env.SEALING_KEY = randomBytes(32).toString("hex");
process.env.SESSION_SECRET = randomBytes(32).toString("hex");

const { DockerRuntime } = await import("../worker/runtime/docker.ts");
const { setRuntime } = await import("../worker/runtime/index.ts");
const image = process.env.AGENT_GATEWAY_IMAGE ?? "agent-gateway:2026.9.6";
const rt = new DockerRuntime({ maxCpus: 1 });
const skip = await rt
  .ping()
  .then(async () => ((await rt.imageId(image)) ? undefined : `image ${image} is not built`))
  .catch((error: Error) => `no Docker engine (${error.message})`);

if (skip) {
  console.warn(`\nagent runtime benchmark skipped: ${skip}`);
} else {
  setRuntime(rt);
  const database = await startBenchDatabase("runtime");
  const { databaseUrl } = database;
  const { db, closeDb } = await import("../app/server/platform/db.server.ts");
  const { ensureInstanceRecord, getInstance } = await import(
    "../app/server/agents/instances.server.ts"
  );
  const { DEPLOYMENT_LABEL } = await import("../worker/instances/engine.ts");
  const { provision } = await import("../worker/instances/provision.ts");
  const { runAction } = await import("../worker/instances/actions.ts");
  const { teardown } = await import("../worker/instances/teardown.ts");
  const { waitHealthy } = await import("../worker/instances/health.ts");
  const { fillPool, WARMUP_CYCLES } = await import("../worker/instances/pool-fill.ts");
  const { warmUpAfterBoot } = await import("../worker/instances/warm-up.ts");
  const { resetEnvCache } = await import("../app/server/platform/env.server.ts");
  const { stopBoss } = await import("../app/server/platform/jobs.server.ts");
  const { createSession } = await import("../app/server/accounts/sessions.server.ts");
  const { gatewayHealthy } = await import("../app/server/openclaw/health.server.ts");
  const addUser = async (userId: string) => {
    await db()`insert into users (id, email, name, referral_code)
      values (${userId}, ${`${userId}@example.com`}, 'bench', ${userId
        .replace(/[^a-z0-9]/gi, "")
        .slice(-20)
        .toUpperCase()})`;
    await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason)
      values (${`led_${userId}`}, ${userId}, ${1_000_000_000}, 'bench')`;
  };
  const children: Child[] = [];

  const rows: Array<[string, string]> = [];
  const mib = (n: number) => `${(n / 1024 ** 2).toFixed(0)} MiB`;
  const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const untilHealthy = async (address: string) => {
    while (!(await gatewayHealthy(address, 2_000))) await new Promise((r) => setTimeout(r, 200));
  };
  try {
    const { gatewayIp } = await rt.ensureNetwork(process.env.RUNTIME_NETWORK as string, {
      [DEPLOYMENT_LABEL]: run,
    });
    // 1. bare docker run of the same image: token only, same network, same CPU cap.
    let t = Date.now();
    const bare = await rt.docker.createContainer({
      Image: image,
      Env: [`OPENCLAW_GATEWAY_TOKEN=${randomBytes(32).toString("hex")}`],
      Labels: { [DEPLOYMENT_LABEL]: run },
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
    await addUser(`usr_${run}`);
    const row = await ensureInstanceRecord(`usr_${run}`, { plan: "solo" });
    const p = (await provision(row.id)) as { healthyMs: number; readyMs: number };
    await new Promise((r) => setTimeout(r, 10_000));
    const current = (await getInstance(row.id)) as NonNullable<
      Awaited<ReturnType<typeof getInstance>>
    >;
    const idleMem = (await rt.stats(current.container_name)).memoryBytes;

    // 3. stop, start (to healthy), restart (to healthy), through the worker's actions.
    t = Date.now();
    await runAction(current, "stop");
    const stopMs = Date.now() - t;
    t = Date.now();
    await runAction((await getInstance(row.id)) as typeof current, "start");
    const startCallMs = Date.now() - t;
    const afterStart = await rt.inspect(current.container_name);
    await untilHealthy(`${afterStart?.address}:18789`);
    const startHealthyMs = Date.now() - t;
    t = Date.now();
    await runAction((await getInstance(row.id)) as typeof current, "restart");
    const restartCallMs = Date.now() - t;
    const afterRestart = await rt.inspect(current.container_name);
    await untilHealthy(`${afterRestart?.address}:18789`);
    const restartHealthyMs = Date.now() - t;
    await teardown(current.user_id);

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

    // 4. warm pool: the tenant's first chat, provision-instance start → reply, through the web.
    if (!existsSync(path.join(root, "build/index.js"))) {
      rows.push(["warm pool → first chat reply", "skipped: run `npm run build` first"]);
    } else {
      const provider = await startNode("bench/fake-openai.ts", await freePort(), "/v1/models");
      children.push(provider);
      const port = await freePort();
      const web = await startNode("server.ts", port, "/api/health", {
        HOST: "0.0.0.0", // the gateways reach its model endpoint at the bridge address
        DATABASE_URL: databaseUrl,
        OPENAI_BASE_URL: `${provider.url}/v1`,
        OPENAI_API_KEY: "bench",
        SEALING_KEY: process.env.SEALING_KEY as string,
        SESSION_SECRET: process.env.SESSION_SECRET as string,
        RATE_LIMIT_SCALE: "1000",
      });
      children.push(web);
      process.env.RUNTIME_PLATFORM_AI_URL = `http://${gatewayIp}:${port}/api/ai/v1`;
      process.env.RUNTIME_POOL_SIZE = "1";
      resetEnvCache();
      /** provision-instance start → adopted, → first reply (POST /api/agent), → a second reply. */
      const firstChat = async (name: string) => {
        const userId = `usr_${name}_${run.replace(/-/g, "_")}`;
        await addUser(userId);
        const cookie = (await createSession(userId)).setCookie.split(";")[0] as string;
        const postAgent = agentPoster(web.url, cookie);
        const tenant = await ensureInstanceRecord(userId, { plan: "solo" });
        const t0 = Date.now();
        const p = await provision(tenant.id);
        if (!("adopted" in p)) throw new Error("provisioning did not adopt a pooled gateway");
        const adoptMs = Date.now() - t0;
        await postAgent({ message: "Hello!" });
        const firstMs = Date.now() - t0;
        let t1 = Date.now();
        await postAgent({ message: "And again" });
        const secondMs = Date.now() - t1;
        // A new session's first turn (what part of the first reply is per session, not per boot).
        const { sessionId } = await postAgent({ action: "create-session" });
        t1 = Date.now();
        await postAgent({ message: "Hello again", sessionId });
        return { adoptMs, firstMs, secondMs, newSessionMs: Date.now() - t1 };
      };
      t = Date.now();
      await fillPool();
      const fillMs = Date.now() - t;
      const warm = await firstChat("warm");
      // For comparison: no dry run (what the pool did before decision 0038). Its first turn can
      // fail outright (decision 0038); that is reported, not retried.
      await fillPool({ warmUpCycles: 0 });
      const cold = await firstChat("unwarmed").catch((error: Error) => error);
      // No pool, the dry run at cold provisioning instead: provision start → ready → first reply.
      process.env.RUNTIME_POOL_SIZE = "0";
      process.env.RUNTIME_COLD_WARMUP = "on";
      resetEnvCache();
      const coldUser = `usr_colddry_${run.replace(/-/g, "_")}`;
      await addUser(coldUser);
      const coldCookie = (await createSession(coldUser)).setCookie.split(";")[0] as string;
      const coldTenant = await ensureInstanceRecord(coldUser, { plan: "solo" });
      t = Date.now();
      await provision(coldTenant.id);
      const coldReadyMs = Date.now() - t;
      await agentPoster(web.url, coldCookie)({ message: "Hello!" });
      const coldFirstMs = Date.now() - t;
      // A restart of that gateway: restart → first reply, with the boot's dry run
      // (warm-up-instance, run here as the worker would) and without it.
      const coldPost = agentPoster(web.url, coldCookie);
      const restartToFirstReply = async (dryRun: boolean) => {
        const row = (await getInstance(coldTenant.id)) as NonNullable<
          Awaited<ReturnType<typeof getInstance>>
        >;
        const t0 = Date.now();
        await runAction(row, "restart");
        const info = await rt.inspect(row.container_name);
        if (info) await waitHealthy(info);
        const healthyMs = Date.now() - t0;
        if (dryRun) await warmUpAfterBoot(row.id);
        const readyMs = Date.now() - t0;
        try {
          await coldPost({ message: "Hello after a restart" });
        } catch (error) {
          return `failed after ${secs(Date.now() - t0)}: ${(error as Error).message.slice(0, 100)}`;
        }
        const replyMs = Date.now() - t0 - readyMs;
        return `${secs(readyMs + replyMs)} (healthy ${secs(healthyMs)}${dryRun ? `, dry run done ${secs(readyMs)}` : ""}; reply ${secs(replyMs)})`;
      };
      const restartDry = await restartToFirstReply(true);
      process.env.RUNTIME_COLD_WARMUP = "off";
      resetEnvCache();
      const restartBare = await restartToFirstReply(false);
      const target = 3_000;
      rows.push(
        [
          `pool fill: start, pair, ${WARMUP_CYCLES} dry run(s)`,
          `${secs(fillMs)} (${(fillMs / bareMs).toFixed(2)}× bare)`,
        ],
        ["warm pool: provision → adopted", secs(warm.adoptMs)],
        [
          "warm pool: provision → first reply",
          `${secs(warm.firstMs)} (target ${secs(target)}: ${warm.firstMs <= target ? "met" : "MISSED"}; ${(warm.firstMs / bareMs).toFixed(2)}× bare → /healthz)`,
        ],
        ["warm pool: second reply", secs(warm.secondMs)],
        ["warm pool: first reply, 2nd new session", secs(warm.newSessionMs)],
        [
          "no pool, dry run at provisioning",
          `ready ${secs(coldReadyMs)}, first reply ${secs(coldFirstMs)} (${secs(coldFirstMs - coldReadyMs)} after ready)`,
        ],
        ["restart → first reply, dry run at boot", restartDry],
        ["restart → first reply, no dry run", restartBare],
        [
          "pool without dry run: first reply",
          cold instanceof Error
            ? `failed: ${cold.message.slice(0, 120)}`
            : `${secs(cold.firstMs)} (adopted in ${secs(cold.adoptMs)}; second ${secs(cold.secondMs)}; 2nd session ${secs(cold.newSessionMs)})`,
        ],
      );
    }
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    await removeRunObjects(rt, DEPLOYMENT_LABEL, run, process.env.RUNTIME_NETWORK as string);
    // An adoption enqueues a pool refill, which starts a job client: it would keep this alive.
    await stopBoss({ graceful: false });
    await closeDb();
    await database.stop();
  }
  console.warn(
    `\nAgent runtime (${image}, 1 CPU per gateway, ${os.cpus().length} cores, load ${os.loadavg()[0]?.toFixed(1)})\n`,
  );
  for (const [k, v] of rows) console.warn(`${k.padEnd(40)} ${v}`);
}
await rm(dataDir, { recursive: true, force: true });
