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
import { cpuPercent, cpuTimes, procMeminfo, swapDevices, zswapState } from "./density-host.ts";
import {
  type AgentState,
  goals,
  latencyRows,
  mib,
  printGoals,
  printRows,
  type Reply,
} from "./density-report.ts";
import { type GatewaySample, sampleGateways } from "./density-sample.ts";
import { removeRunObjects } from "./docker-run.ts";
import { agentPoster, type Child, root, startNode } from "./servers.ts";
import { containerSmaps } from "./smaps.ts";
import { until } from "./until.ts";

// `npm run bench:density` (issue 53): many agents on one host. The platform runs as `npm start`
// runs it (web and worker as their own processes, the embedded database), with the real gateway
// image, a stand-in model (bench/fake-openai.ts) and the warm pool on. DENSITY_AGENTS users each
// provision one agent through the HTTP API; agents fall asleep by the platform's own rules (the
// idle period shortened with SLEEP_IDLE_SECONDS); then a random agent is messaged every
// DENSITY_INTERVAL_SECONDS for DENSITY_SECONDS. The idle period is DENSITY_AWAKE intervals, so
// about DENSITY_AWAKE agents are awake at a time. It prints agents, awake, asleep by kind, host
// memory, swap and zswap, reply times by the state the agent was in, failed wakes, host CPU,
// RAM per sleeper and per awake idle gateway at every sample, and exits 1 when a goal misses.

const int = (name: string, fallback: number) => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || v < 0) throw new Error(`${name} must be a whole number`);
  return v;
};
const AGENTS = int("DENSITY_AGENTS", 100);
const AWAKE = int("DENSITY_AWAKE", 10);
const SECONDS = int("DENSITY_SECONDS", 900);
const INTERVAL = int("DENSITY_INTERVAL_SECONDS", 3);
const POOL = int("DENSITY_POOL", 1);
const SAMPLE_SECONDS = int("DENSITY_SAMPLE_SECONDS", 10);
const IDLE = int("DENSITY_IDLE_SECONDS", Math.max(5, AWAKE * INTERVAL));

const run = `bench-density-${randomBytes(3).toString("hex")}`;
const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-bench-density-"));
process.env.LOG_LEVEL ??= "silent";
process.env.DATA_DIR = dataDir;
process.env.RUNTIME_DEPLOYMENT = run;
process.env.RUNTIME_NETWORK = `agent-${run}`;
process.env.RUNTIME_MAX_CPUS ??= "1";
process.env.SEALING_KEY = randomBytes(32).toString("hex");
process.env.SESSION_SECRET = randomBytes(32).toString("hex");

const { DockerRuntime } = await import("../worker/runtime/docker.ts");
const image = process.env.AGENT_GATEWAY_IMAGE ?? "agent-gateway:2026.9.6";
const rt = new DockerRuntime({ maxCpus: Number(process.env.RUNTIME_MAX_CPUS) });
const skip = await rt
  .ping()
  .then(async () => {
    if (!(await rt.imageId(image))) return `image ${image} is not built`;
    return existsSync(path.join(root, "build/index.js")) ? undefined : "run `npm run build` first";
  })
  .catch((error: Error) => `no Docker engine (${error.message})`);

if (skip) {
  console.warn(`\ndensity benchmark skipped: ${skip}`);
  await rm(dataDir, { recursive: true, force: true });
  process.exit(0);
}

// The host's limits beside what the run needs: a host that cannot hold its sleepers frozen ends
// here, not after hours of provisioning (DENSITY_IGNORE_LIMITS=1 goes on anyway).
const { densityPreflight } = await import("./density-preflight.ts");
const misses = await densityPreflight(rt, { agents: AGENTS, awake: AWAKE, pool: POOL });
if (misses.length) {
  for (const miss of misses) console.warn(`[density] host limit: ${miss}`);
  if (process.env.DENSITY_IGNORE_LIMITS !== "1") {
    console.warn("[density] not started (DENSITY_IGNORE_LIMITS=1 runs it anyway)");
    await rm(dataDir, { recursive: true, force: true });
    process.exit(1);
  }
}

const base = existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir();
const cluster = await startCluster({
  dir: path.join(base, `agent-bench-density-pg-${process.pid}`),
  settings: { fsync: "off", synchronous_commit: "off" },
});
const admin = postgres(cluster.url, { max: 1, onnotice: () => {} });
await admin.unsafe("create database bench_density");
await admin.end();
const databaseUrl = withDatabase(cluster.url, "bench_density");
process.env.DATABASE_URL = databaseUrl;
const { db, closeDb } = await import("../app/server/platform/db.server.ts");
const { migrate } = await import("../db/migrate.ts");
const { ensureQueueSchema } = await import("../app/server/platform/jobs.server.ts");
const { createSession } = await import("../app/server/accounts/sessions.server.ts");
const { DEPLOYMENT_LABEL } = await import("../worker/instances/engine.ts");
await migrate(db());
await ensureQueueSchema();

const children: Child[] = [];
const volumes: string[] = [];
const replies: Reply[] = [];
const samples: GatewaySample[] = [];
let failed = false;

interface Tenant {
  userId: string;
  agentId: string;
  instanceId: string;
  container: string;
  post: ReturnType<typeof agentPoster>;
  busy: boolean;
}

/** A user with an active plan, credits and a session cookie (sign-up itself is not measured). */
async function tenant(i: number): Promise<{ userId: string; cookie: string }> {
  const userId = `usr_${run.replace(/-/g, "_")}_${i}`;
  await db()`insert into users (id, email, name, referral_code)
    values (${userId}, ${`${run}-${i}@example.com`}, ${`density ${i}`},
      ${`D${randomBytes(8).toString("hex").toUpperCase()}`})`;
  await db()`insert into subscriptions (id, user_id, stripe_customer_id, kind, item, price_id,
      status, current_period_end)
    values (${`sub_${run}_${i}`}, ${userId}, ${`cus_${userId}`}, 'plan', 'solo', 'price_solo',
      'active', now() + interval '30 days')`;
  await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason)
    values (${`led_${run}_${i}`}, ${userId}, ${1_000_000_000}, 'bench')`;
  const cookie = (await createSession(userId)).setCookie.split(";")[0] as string;
  return { userId, cookie };
}

async function api<T>(url: string, cookie: string, init: RequestInit = {}): Promise<T> {
  const res = await fetch(url, {
    ...init,
    headers: { cookie, "content-type": "application/json", ...init.headers },
  });
  const json = (await res.json()) as T & { error?: string };
  if (!res.ok) throw new Error(`${init.method ?? "GET"} ${url} ${res.status}: ${json.error}`);
  return json;
}

const sleepingCount = async () => {
  const [row] = await db()<{ n: number }[]>`
    select count(*)::int as n from instances where observed_state = 'sleeping'`;
  return row?.n ?? 0;
};

/** The state the agent is in as its message leaves: from the engine, as the user would meet it. */
async function stateOf(t: Tenant): Promise<AgentState> {
  const [row] = await db()<{ observed_state: string }[]>`
    select observed_state from instances where id = ${t.instanceId}`;
  if (row?.observed_state === "starting") return "waking";
  const info = await rt.inspect(t.container);
  if (info?.state === "paused") return "frozen";
  if (row?.observed_state === "sleeping") return info?.running ? "other" : "stopped";
  return row?.observed_state === "running" ? "awake" : "other";
}

const t0 = Date.now();
const cpuStart = await cpuTimes();
let cpuMax = 0;
try {
  const { gatewayIp } = await rt.ensureNetwork(process.env.RUNTIME_NETWORK as string, {
    [DEPLOYMENT_LABEL]: run,
  });
  const secrets = {
    SEALING_KEY: process.env.SEALING_KEY as string,
    SESSION_SECRET: process.env.SESSION_SECRET as string,
  };
  const provider = await startNode("bench/fake-openai.ts", await freePort(), "/v1/models");
  children.push(provider);
  const webPort = await freePort();
  const web = await startNode("server.ts", webPort, "/api/health", {
    ...secrets,
    HOST: "0.0.0.0",
    DATABASE_URL: databaseUrl,
    OPENAI_BASE_URL: `${provider.url}/v1`,
    OPENAI_API_KEY: "bench",
    RATE_LIMIT_SCALE: "1000",
    AGENT_CHAT_START_WAIT_MS: "300000",
    AGENT_WAKE_WAIT_MS: "300000",
  });
  children.push(web);
  // The worker as `npm start` runs it; its metrics listener is the probe that it is up.
  const metricsPort = await freePort();
  const worker = await startNode("worker/index.ts", metricsPort, "/metrics", {
    ...secrets,
    WORKER_METRICS_PORT: String(metricsPort),
    DATABASE_URL: databaseUrl,
    RUNTIME_PLATFORM_AI_URL: `http://${gatewayIp}:${webPort}/api/ai/v1`,
    RUNTIME_POOL_SIZE: String(POOL),
    SLEEP_IDLE_SECONDS: String(IDLE),
    SLEEP_CRON: "* * * * *",
    WORKER_STOP_GRACE_MS: "5000",
    // A boot on a busy host can take minutes (the provisioning below waits as long).
    GATEWAY_HEALTH_TIMEOUT_MS: process.env.GATEWAY_HEALTH_TIMEOUT_MS ?? "600000",
  });
  children.push(worker);

  // 1. Provision through the API, one after the other (the pool's gateway goes first).
  const tenants: Tenant[] = [];
  for (let i = 0; i < AGENTS; i++) {
    const { userId, cookie } = await tenant(i);
    const { agent } = await api<{ agent: { id: string } }>(
      `${web.url}/api/agents/provision`,
      cookie,
      { method: "POST", body: JSON.stringify({ name: `Density ${i}` }) },
    );
    await until(`agent ${i} running`, 900_000, async () => {
      const detail = await api<{ agent: { status: string } }>(
        `${web.url}/api/agents/${agent.id}`,
        cookie,
      );
      // An `error` on the way (a boot that failed) is the platform's to heal, as for a user.
      return detail.agent.status === "running" ? true : undefined;
    });
    const [row] = await db()<{ id: string; container_name: string; volume_name: string }[]>`
      select id, container_name, volume_name from instances where user_id = ${userId}`;
    if (!row) throw new Error(`agent ${i} has no instance`);
    volumes.push(row.volume_name);
    const t: Tenant = {
      userId,
      agentId: agent.id,
      instanceId: row.id,
      container: row.container_name,
      post: agentPoster(web.url, cookie),
      busy: false,
    };
    // Ready when it has answered once, as real agents have (a provisioning that failed after
    // the gateway came up is retried by the platform meanwhile).
    await until(`agent ${i} answering`, 900_000, () =>
      t.post({ message: "hello" }).then(
        () => true,
        () => undefined,
      ),
    );
    tenants.push(t);
    console.warn(`[density] ${i + 1}/${AGENTS} agents provisioned (${secs(Date.now() - t0)})`);
  }

  // 2. Let them fall asleep by the platform's rules (idle period, the sleep pass each minute).
  const asleepGoal = Math.max(0, AGENTS - AWAKE);
  await until(`${asleepGoal} agents asleep`, 180_000 + AGENTS * 15_000, async () =>
    (await sleepingCount()) >= asleepGoal ? true : undefined,
  );
  console.warn(`[density] ${await sleepingCount()} asleep; messaging for ${SECONDS} s`);

  // 3. A random agent every INTERVAL seconds; memory and CPU sampled every SAMPLE_SECONDS.
  const inFlight = new Set<Promise<void>>();
  const busyContainers = () => new Set(tenants.filter((t) => t.busy).map((t) => t.container));
  const agentNames = new Set(tenants.map((t) => t.container));
  const sample = () =>
    sampleGateways(rt, { [DEPLOYMENT_LABEL]: run }, agentNames, busyContainers());
  const end = Date.now() + SECONDS * 1000;
  let lastCpu = await cpuTimes();
  let nextSample = Date.now();
  while (Date.now() < end) {
    if (Date.now() >= nextSample) {
      nextSample += SAMPLE_SECONDS * 1000;
      samples.push(await sample());
      const cpu = await cpuTimes();
      cpuMax = Math.max(cpuMax, cpuPercent(lastCpu, cpu));
      lastCpu = cpu;
    }
    const idle = tenants.filter((t) => !t.busy);
    const t = idle[Math.floor(Math.random() * idle.length)];
    if (t) {
      t.busy = true;
      const state = await stateOf(t);
      const started = Date.now();
      const p = t
        .post({ message: `density ${replies.length}` })
        .then(
          () => {
            replies.push({ state, ms: Date.now() - started, ok: true });
          },
          (error: Error) => {
            replies.push({ state, ms: Date.now() - started, ok: false, error: error.message });
            console.warn(`[density] a message to a ${state} agent failed: ${error.message}`);
          },
        )
        .finally(() => {
          t.busy = false;
          inFlight.delete(p);
        });
      inFlight.add(p);
    }
    await new Promise((r) => setTimeout(r, INTERVAL * 1000));
  }
  await Promise.all(inFlight);
  samples.push(await sample());

  // 4. The figures.
  const cpuEnd = await cpuTimes();
  const [wakeRuns] = await db()<{ ready: number; failed: number }[]>`
    select count(*) filter (where outcome = 'ready')::int as ready,
      count(*) filter (where outcome = 'failed')::int as failed
    from instance_runs where action = 'wake'`;
  const [disk] = await db()<{ bytes: number | null }[]>`
    select avg(storage_bytes)::float8 as bytes from instances where storage_bytes is not null`;
  const unansweredSleepers = replies.filter(
    (r) => !r.ok && (r.state === "frozen" || r.state === "stopped" || r.state === "waking"),
  ).length;
  const failedWakes = Math.max(wakeRuns?.failed ?? 0, unansweredSleepers);
  const last = samples.at(-1);
  const host = await procMeminfo.read();
  const sleeperMeans = samples.filter((s) => s.frozen.length).map((s) => s.sleeperMeanBytes);
  const awakeIdle = samples.flatMap((s) => s.awakeIdle.map((g) => g.resident));
  const rows: Array<[string, string]> = [
    ["agents", String(AGENTS)],
    [
      "awake (last sample; pool gateways apart)",
      `${last?.awakeAgents ?? 0} (+${last?.pool ?? 0} pooled)`,
    ],
    [
      "asleep (last sample)",
      `${last?.frozen.length ?? 0} frozen (of their swap ~${last?.compressedPercent.toFixed(0) ?? 0} % compressed in RAM, the rest on disk), ${last?.stopped ?? 0} stopped`,
    ],
    [
      "host RAM used / swap used",
      `${mib(host.totalBytes - host.availableBytes)} of ${mib(host.totalBytes)} / ${mib(host.swapTotalBytes - host.swapFreeBytes)} of ${mib(host.swapTotalBytes)}`,
    ],
    [
      "zswap pool (RAM) / holding",
      `${mib(host.zswapPoolBytes)} / ${mib(host.zswappedBytes)} (${await zswapState()})`,
    ],
    ...latencyRows(replies),
    ["wakes (ready / failed)", `${wakeRuns?.ready ?? 0} / ${wakeRuns?.failed ?? 0}`],
    [
      "host CPU busy (run mean / worst sample)",
      `${cpuPercent(cpuStart, cpuEnd).toFixed(0)} % / ${cpuMax.toFixed(0)} %`,
    ],
    [
      "RAM per sleeper (resident + pool share; mean of samples)",
      sleeperMeans.length
        ? `${mib(sleeperMeans.reduce((a, b) => a + b, 0) / sleeperMeans.length)} (resident ${mib(last?.sleeperResidentMeanBytes ?? Number.NaN)})`
        : "no frozen sleeper sampled",
    ],
    [
      "RAM per awake idle gateway (max / samples)",
      `${mib(awakeIdle.length ? Math.max(...awakeIdle) : Number.NaN)} / ${awakeIdle.length}`,
    ],
    ["disk per agent (state volume, mean)", mib(disk?.bytes ?? Number.NaN)],
  ];
  printRows(
    `Density (${image}, ${process.env.RUNTIME_MAX_CPUS} CPU per gateway, ${os.cpus().length} cores, load ${os.loadavg()[0]?.toFixed(1)}; swap ${await swapDevices()}; ${SECONDS} s, a message every ${INTERVAL} s, idle period ${IDLE} s)`,
    rows,
  );
  const list = goals({
    replies,
    sleeperSamples: sleeperMeans,
    awakeIdleSamples: awakeIdle,
    failedWakes,
  });
  // What one frozen sleeper keeps resident and has in swap, by kind of mapping (decision 0222).
  const profiled = last?.frozen[0];
  if (profiled) {
    const id = (await rt.inspect(profiled.name))?.id;
    const kinds = id ? await containerSmaps(id) : new Map();
    printRows(
      `A frozen sleeper's memory by kind (smaps of its processes: ${profiled.name})`,
      [...kinds.entries()].map(([kind, f]) => [
        kind,
        `resident ${mib(f.rss)}, in swap ${mib(f.swap)} (${f.mappings} mappings)`,
      ]),
    );
  }
  printGoals(list);
  failed = list.some((g) => !g.met);
} catch (error) {
  console.error(error);
  failed = true;
} finally {
  for (const c of [...children].reverse()) await c.stop();
  // Every instance's volume, also of one that never came up (made by its container's mount).
  const recorded = await db()<{ volume_name: string }[]>`select volume_name from instances`.catch(
    () => [],
  );
  const allVolumes = [...new Set([...volumes, ...recorded.map((r) => r.volume_name)])];
  await removeRunObjects(
    rt,
    DEPLOYMENT_LABEL,
    run,
    process.env.RUNTIME_NETWORK as string,
    allVolumes,
  );
  for (const n of await rt.listNetworks({ [DEPLOYMENT_LABEL]: run })) {
    await rt.removeNetwork(n.name).catch(() => {});
  }
  await closeDb();
  await cluster.stop();
  await rm(cluster.dir, { recursive: true, force: true });
  await rm(dataDir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);

function secs(ms: number) {
  return `${(ms / 1000).toFixed(0)} s`;
}
