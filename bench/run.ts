import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import postgres from "postgres";
import {
  freePort,
  startCluster,
  withDatabase,
} from "../app/server/platform/embedded-postgres.server.ts";
import { recordingCost } from "./metrics-record.ts";
import { type Child, root, startNode } from "./servers.ts";

// `npm run bench`: throughput and p99 latency of the platform's endpoints against a baseline
// measured in the same run, reported as ratios. Each server runs in its own process; the load
// generator (autocannon, 50 connections) in this one.

const DURATION = Number(process.env.BENCH_SECONDS ?? 8);
const CONNECTIONS = 50;
/** Issue 23's targets for every authenticated read, printed beside each row's figures. */
const READ_TARGET_RATIO = 0.25;
const READ_TARGET_P99_MS = 15;

interface Row {
  name: string;
  rps: number;
  p99: number;
  errors: number;
  /** CPU (user + system) the serving process spent per request, in ms (Linux only). */
  cpuPerRequest?: number;
  /** CPU the database's processes spent per request, in ms (Linux only). */
  dbCpuPerRequest?: number;
}

/**
 * CPU time a process has used so far, in ms, from /proc (clock ticks of 10 ms); undefined off
 * Linux. Unlike throughput, CPU per request hardly moves when other work shares the machine.
 */
function cpuMs(pid: number | undefined): number | undefined {
  if (!pid) return undefined;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

/**
 * CPU time the bench's PostgreSQL has used so far (the postmaster and its backends, found by
 * parent pid), in ms; undefined off Linux. Shares the machine's cores with the web process.
 */
function dbCpuMs(): number | undefined {
  try {
    const postmaster = Number(
      readFileSync(path.join(cluster.dir, "data", "postmaster.pid"), "utf8").split("\n")[0],
    );
    let total = 0;
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      } catch {
        continue; // gone meanwhile
      }
      const fields = stat.split(") ")[1]!.split(" ");
      if (Number(entry) !== postmaster && Number(fields[1]) !== postmaster) continue;
      total += (Number(fields[11]) + Number(fields[12])) * 10;
    }
    return total;
  } catch {
    return undefined;
  }
}

interface Target {
  method?: "GET" | "POST";
  body?: string;
  headers?: Record<string, string>;
  setupClient?: (client: autocannon.Client) => void;
}

async function measure(
  name: string,
  url: string,
  expectStatus = 200,
  target: Target = {},
  /** The serving process, for its CPU per request. */
  server?: Child,
  /** Waits for the work the requests left behind (metering), counted in their CPU. */
  settle?: () => Promise<void>,
) {
  // A short warm-up lets the JIT and the connection pools settle before the measured run.
  await autocannon({ url, connections: CONNECTIONS, duration: 1, ...target });
  await settle?.();
  const cpuBefore = cpuMs(server?.process.pid);
  const dbBefore = server ? dbCpuMs() : undefined;
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, ...target });
  await settle?.();
  const cpuAfter = cpuMs(server?.process.pid);
  const dbAfter = server ? dbCpuMs() : undefined;
  const cpuPerRequest =
    cpuBefore !== undefined && cpuAfter !== undefined && r.requests.total > 0
      ? (cpuAfter - cpuBefore) / r.requests.total
      : undefined;
  const unexpected =
    expectStatus === 200
      ? r.non2xx
      : r.requests.sent - (r.statusCodeStats?.[String(expectStatus) as "404"]?.count ?? 0);
  const errors = r.errors + r.timeouts + Math.max(0, unexpected);
  const dbCpuPerRequest =
    dbBefore !== undefined && dbAfter !== undefined && r.requests.total > 0
      ? (dbAfter - dbBefore) / r.requests.total
      : undefined;
  return {
    name,
    rps: r.requests.average,
    p99: r.latency.p99,
    errors,
    cpuPerRequest,
    dbCpuPerRequest,
  } satisfies Row;
}

/**
 * The load generator's connections split evenly between `servers` (one autocannon each, run
 * together): the total rate, the worst p99, and the servers' CPU per request.
 */
async function measureSplit(
  name: string,
  servers: Child[],
  path: string,
  headers: Record<string, string>,
): Promise<Row> {
  const connections = Math.floor(CONNECTIONS / servers.length);
  const run = (duration: number) =>
    Promise.all(
      servers.map((s) => autocannon({ url: `${s.url}${path}`, connections, duration, headers })),
    );
  await run(1);
  const cpu = () => servers.reduce((sum, s) => sum + (cpuMs(s.process.pid) ?? 0), 0);
  const before = cpu();
  const results = await run(DURATION);
  const total = results.reduce((sum, r) => sum + r.requests.total, 0);
  return {
    name,
    rps: results.reduce((sum, r) => sum + r.requests.average, 0),
    p99: Math.max(...results.map((r) => r.latency.p99)),
    errors: results.reduce((sum, r) => sum + r.errors + r.timeouts + r.non2xx, 0),
    cpuPerRequest: total > 0 ? (cpu() - before) / total : undefined,
  };
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
};

/**
 * A minimal client for the one-at-a-time rounds: node:http over one kept-alive socket per
 * target. undici's fetch (Request, Headers, Response, a Web stream per body) cost the bench
 * process more per call than the hop being measured, and its garbage made GC pauses in the
 * load generator that landed on whichever call was running (docs/decisions/0088).
 */
function oneAtATime(url: string) {
  const target = new URL(url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  return (target0: Target) => {
    const body = Buffer.from(target0.body ?? "");
    const headers = { ...target0.headers, "content-length": String(body.byteLength) };
    return () =>
      new Promise<{ first: number; end: number; overhead: string | undefined }>(
        (resolve, reject) => {
          const t0 = performance.now();
          const req = http.request(target, { method: "POST", headers, agent }, (res) => {
            let first = 0;
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (chunk: string) => {
              if (first === 0) first = performance.now() - t0;
              if (res.statusCode !== 200) text += chunk;
            });
            res.on("end", () => {
              if (res.statusCode !== 200) {
                reject(new Error(`${url} answered ${res.statusCode}: ${text}`));
                return;
              }
              const overhead = res.headers["x-overhead-ms"];
              resolve({ first, end: performance.now() - t0, overhead: overhead as string });
            });
            res.on("error", reject);
          });
          req.on("error", reject);
          req.end(body);
        },
      );
  };
}

/** A seeded shuffle (the same orders every run, so runs compare). */
function shuffler(seed: number) {
  let x = seed;
  const random = () => {
    x = (x * 1_103_515_245 + 12_345) % 2_147_483_648;
    return x / 2_147_483_648;
  };
  return <T>(items: T[]): T[] => {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  };
}

/**
 * One request at a time: the provider directly, through a bare Node proxy (the floor: one extra
 * HTTP hop and nothing else) and through the platform, in a shuffled order each round so that no
 * path always runs first, or always right after the platform's metering flush of the call
 * before. End-to-end latency (or time to the first streamed bytes) of each, and the platform's
 * own x-overhead-ms.
 */
async function latencyRounds(
  direct: string,
  directTarget: Target,
  floor: string,
  via: string,
  viaTarget: Target,
  stream: boolean,
) {
  const rounds = Number(process.env.BENCH_LATENCY_ROUNDS ?? 1000);
  const d: number[] = [];
  const f: number[] = [];
  const v: number[] = [];
  const overhead: number[] = [];
  const paths = [
    { call: oneAtATime(direct)(directTarget), into: d },
    { call: oneAtATime(floor)(directTarget), into: f },
    { call: oneAtATime(via)(viaTarget), into: v, overhead: true },
  ];
  const shuffle = shuffler(stream ? 2 : 1);
  // Unmeasured rounds first: the JIT has compiled all three paths before anything is counted.
  for (let i = -Math.ceil(rounds / 4); i < rounds; i++) {
    for (const path of shuffle(paths)) {
      const r = await path.call();
      if (i < 0) continue;
      path.into.push(stream ? r.first : r.end);
      if (path.overhead && r.overhead !== undefined) overhead.push(Number(r.overhead));
    }
  }
  const p = (xs: number[]) => ({ p50: percentile(xs, 50), p99: percentile(xs, 99) });
  return { direct: p(d), floor: p(f), via: p(v), overhead: p(overhead) };
}

/** Registers a user through the API, signs in, and creates an API key with the session. */
async function prepareAccount(url: string) {
  const email = `bench-${process.pid}@example.com`;
  const password = "benchmark password";
  // A browser-like User-Agent: Node's fetch says "node", which the bot detection refuses.
  const ua = { "user-agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/140.0 Safari/537.36" };
  const json = { ...ua, "content-type": "application/json" };
  const reg = await fetch(`${url}/api/register`, {
    method: "POST",
    headers: json,
    body: JSON.stringify({ email, password }),
  });
  if (reg.status !== 201) throw new Error(`register: ${reg.status} ${await reg.text()}`);
  const signIn = await fetch(`${url}/api/auth/callback/credentials`, {
    method: "POST",
    headers: json,
    body: JSON.stringify({ email, password }),
  });
  const cookie = signIn.headers.getSetCookie()[0]?.split(";")[0];
  if (!cookie) throw new Error(`sign-in: ${signIn.status} ${await signIn.text()}`);
  const created = await fetch(`${url}/api/keys`, {
    method: "POST",
    headers: { ...json, cookie },
    body: JSON.stringify({ name: "bench" }),
  });
  const { key } = (await created.json()) as { key: string };
  if (!key) throw new Error(`create key: ${created.status}`);
  return { email, password, cookie, key };
}

// BENCH_ONLY=gateway-memory: only the idle gateway's memory (Docker; no platform servers).
// BENCH_ONLY=storage: only the state volume's write throughput with and without its limit.
if (process.env.BENCH_ONLY === "gateway-memory" || process.env.BENCH_ONLY === "storage") {
  const file = process.env.BENCH_ONLY === "storage" ? "storage.ts" : "gateway-memory.ts";
  const child = spawn(process.execPath, [path.join(import.meta.dirname, file)], {
    stdio: "inherit",
  });
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  process.exit(code ?? 1);
}

if (!existsSync(path.join(root, "build/index.js"))) {
  console.error("build/index.js is missing: run `npm run build` first");
  process.exit(1);
}

const dir = path.join(
  existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir(),
  `agent-platform-bench-${process.pid}`,
);
const cluster = await startCluster({ dir, settings: { fsync: "off", synchronous_commit: "off" } });
const admin = postgres(cluster.url, { max: 1, onnotice: () => {} });
await admin.unsafe("create database bench");
await admin.end();
const databaseUrl = withDatabase(cluster.url, "bench");

const children: Child[] = [];
const rows: Row[] = [];
const aiRows: Row[] = [];
const authRows: Row[] = [];
const readRows: Row[] = [];
const replicaRows: Row[] = [];
const latency: Array<{ name: string } & Awaited<ReturnType<typeof latencyRounds>>> = [];
/** Instrumentation's cost (issue 51): the same row on a web with metrics off and one with them on. */
const metricsRows: Array<{ name: string; off: Row; on: Row }> = [];
/** An authenticated read for the metrics rows (set by the reads part; /api/health otherwise). */
let metricsRead: { path: string; headers: Record<string, string> } | undefined;
const burstRows: Array<{
  name: string;
  served: number;
  affordable: number;
  spentShare: number;
  uncollected: number;
}> = [];
/** Waits until `n` calls of `user` are recorded (metering is written after the answers). */
async function waitForMetering(sql: postgres.Sql, user: string, n: number) {
  for (let i = 0; i < 200; i++) {
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from ai_usage
      where user_id = ${user}`;
    if ((row?.n ?? 0) >= n) return;
    await new Promise((r) => setTimeout(r, 25));
  }
}
/**
 * Until no metered call is waiting to be written: ai_usage's count unchanged for a second. A
 * row's metering backlog otherwise spills into the next row's window (another process's CPU, or
 * the same process's in its next row), which made the metrics on/off comparison lopsided.
 */
async function waitMeteringIdle(sql: postgres.Sql) {
  let last = -1;
  let same = 0;
  for (let i = 0; i < 600 && same < 4; i++) {
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from ai_usage`;
    same = row?.n === last ? same + 1 : 0;
    last = row?.n ?? 0;
    await new Promise((r) => setTimeout(r, 250));
  }
}
// "ai": only the AI-layer figures; "agents": no AI layer; "reads": bare, health and the
// authenticated reads only (no Remix server, no AI layer, no runtime or chat turn parts)
const only = process.env.BENCH_ONLY;
try {
  const bare = await startNode("bench/bare-health.ts", await freePort(), "/");
  children.push(bare);
  // The local fake provider the AI layer calls (and the baseline calls directly).
  const provider = await startNode("bench/fake-openai.ts", await freePort(), "/v1/models");
  children.push(provider);
  const bareProxy = await startNode("bench/bare-proxy.ts", await freePort(), "/v1/models", {
    TARGET: provider.url,
  });
  children.push(bareProxy);
  const aiEnv = {
    OPENAI_BASE_URL: `${provider.url}/v1`,
    OPENAI_API_KEY: "bench",
    AI_DAILY_LIMIT_USD: "1000000",
  };
  // One set of secrets for every web process: replicas of one platform (sessions and sealed
  // values made by one are read by another).
  const secrets = {
    SESSION_SECRET: randomBytes(32).toString("hex"),
    SEALING_KEY: randomBytes(32).toString("hex"),
  };
  const web = await startNode("server.ts", await freePort(), "/api/health", {
    DATABASE_URL: databaseUrl,
    ...secrets,
    ...aiEnv,
    // The agents API's scope allows 100 requests a minute per user: scaled up so the limiter
    // still runs on every request but never refuses the load generator.
    RATE_LIMIT_SCALE: "1000000",
    // e.g. BENCH_WEB_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the web process
    ...(process.env.BENCH_WEB_NODE_OPTIONS
      ? { NODE_OPTIONS: process.env.BENCH_WEB_NODE_OPTIONS }
      : {}),
  });
  children.push(web);

  if (only !== "ai") {
    const viaRemix =
      only === "reads"
        ? undefined
        : await startNode("server.ts", await freePort(), "/api/health", {
            DATABASE_URL: databaseUrl,
            API_FAST_PATH: "0",
          });
    if (viaRemix) children.push(viaRemix);
    rows.push(await measure("bare node:http, same JSON (baseline)", `${bare.url}/`, 200, {}, bare));
    if (viaRemix) {
      rows.push(
        await measure("GET /api/health through Remix's handler", `${viaRemix.url}/api/health`),
      );
    }
    rows.push(await measure("GET /api/health (fast path)", `${web.url}/api/health`, 200, {}, web));
    rows.push(
      await measure(
        "GET /api/nope (fast path, 404, no database)",
        `${web.url}/api/nope`,
        404,
        {},
        web,
      ),
    );
    if (viaRemix) {
      rows.push(
        await measure("GET /api/nope through Remix's handler", `${viaRemix.url}/api/nope`, 404),
      );
    }

    // Every authenticated read of the API (issue 23), with an API key and with a session
    // cookie, against bare node:http in this run: 20 agents on a running gateway, 200 recorded
    // messages on the first, a few credit ledger entries.
    const account = await prepareAccount(web.url);
    metricsRead = { path: "/api/agents", headers: { authorization: `Bearer ${account.key}` } };
    const agentsSql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    const [owner] = await agentsSql<{ id: string }[]>`
      select id from users where email = ${account.email}`;
    const agentIds = Array.from(
      { length: 20 },
      (_, i) => `agt_bench${String(i).padStart(16, "0")}`,
    );
    for (const [i, id] of agentIds.entries()) {
      await agentsSql`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
        values (${id}, ${owner!.id}, ${`Agent ${i}`}, ${i === 0 ? "main" : id.replace("_", "-")},
                'openai/gpt-4o-mini', 'enterprise')`;
    }
    // Their gateway, running (as the worker last observed it): what the reads show most of the
    // time. The sealed token is never opened by a read.
    await agentsSql`insert into instances (id, user_id, container_name, volume_name,
        gateway_token_sealed, observed_state, health, started_at, cpu_percent, memory_bytes,
        memory_limit_bytes, pids, sampled_at, gateway_version, paired_at)
      values ('ins_benchreads', ${owner!.id}, 'bench', 'bench', 'unused', 'running', 'healthy',
        now(), 1.5, 700000000, 2147483648, 40, now(), '2026.9.6', now())`;
    for (let i = 0; i < 200; i++) {
      await agentsSql`insert into agent_messages
          (id, agent_id, user_id, sender, content, platform, session_key, dedupe_key, created_at)
        values (${`msg_bench_${i}`}, ${agentIds[0]!}, ${owner!.id}, ${i % 2 ? "agent" : "user"},
                ${`message ${i}`}, 'web', 'agent:main:main', ${`k${i}`},
                now() - make_interval(secs => ${200 - i}))`;
    }
    for (let i = 0; i < 5; i++) {
      await agentsSql`insert into credit_ledger (id, user_id, amount_micro_usd, reason)
        values (${`led_reads_${i}`}, ${owner!.id}, ${1_000_000 * (i + 1)}, 'bench')`;
    }
    await agentsSql.end();
    const credentials: Array<{ via: string; headers: Record<string, string> }> = [
      { via: "API key", headers: { authorization: `Bearer ${account.key}` } },
      // Same-origin, as a browser sends it (cookies are refused cross-site).
      { via: "cookie", headers: { cookie: account.cookie } },
    ];
    const readPaths = [
      "/api/user",
      "/api/agents",
      `/api/agents/${agentIds[0]}`,
      `/api/agents/${agentIds[0]}/stats`,
      "/api/credits",
    ];
    for (const probe of readPaths) {
      for (const c of credentials) {
        const res = await fetch(`${web.url}${probe}`, { headers: c.headers });
        const text = await res.text();
        if (res.status !== 200) {
          throw new Error(`${probe} (${c.via}): ${res.status} ${text.slice(0, 300)}`);
        }
      }
    }
    // BENCH_READS=<regular expression>: only the read rows whose name matches (for profiling one).
    const pick = new RegExp(process.env.BENCH_READS ?? "");
    for (const probe of readPaths) {
      for (const c of credentials) {
        const name = `GET ${probe.replace(agentIds[0]!, ":id")} (${c.via})`;
        if (!pick.test(name)) continue;
        readRows.push(await measure(name, `${web.url}${probe}`, 200, { headers: c.headers }, web));
      }
    }
    // Web replicas (issue 19): the same read from the same load generator, all its connections
    // on one web process, then split between two (as DNS round robin spreads clients, the
    // stack's endpoint_mode: dnsrr), on one database. A balancer process in between was tried
    // first: one Node proxy saturated a core at ~4,500 req/s, a third of one replica's rate.
    if (only !== "reads" && process.env.BENCH_REPLICAS !== "0") {
      const replica = () =>
        freePort().then((port) =>
          startNode("server.ts", port, "/api/health", {
            DATABASE_URL: databaseUrl,
            ...secrets,
            RATE_LIMIT_SCALE: "1000000",
          }),
        );
      const [a, b] = [await replica(), await replica()];
      children.push(a, b);
      for (const c of credentials) {
        const name = `GET /api/agents (${c.via})`;
        replicaRows.push(await measureSplit(`${name}, 1 replica`, [a], "/api/agents", c.headers));
        replicaRows.push(
          await measureSplit(`${name}, 2 replicas`, [a, b], "/api/agents", c.headers),
        );
      }
    }
    if (only !== "reads") {
      authRows.push(rows.find((r) => r.name === "GET /api/health (fast path)")!);
      authRows.push(
        await measure(
          "POST /api/auth/callback/credentials",
          `${web.url}/api/auth/callback/credentials`,
          200,
          {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ email: account.email, password: account.password }),
          },
        ),
      );
    }
  }

  // BENCH_ONLY=agents: the platform rows and the agents API only.
  if (only !== "agents" && only !== "reads") {
    // The agents' endpoint against calling the same fake provider directly: an instance token
    // and plenty of credits for a bench user, metering and billing on.
    // One instance token per simulated agent (a user each), so that the figures show the layer
    // serving many agents — the per-user credit row serialises one user's concurrent calls.
    const agents = Number(process.env.BENCH_AGENTS ?? CONNECTIONS);
    const tokens = Array.from(
      { length: agents },
      () => `ait_${randomBytes(24).toString("base64url")}`,
    );
    const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    for (const [i, t] of tokens.entries()) {
      await sql`insert into ai_instance_tokens (token_hash, user_id, instance_id)
        values (${createHash("sha256").update(t).digest("hex")}, ${`usr_bench_${i}`}, ${`ins_${i}`})`;
      await sql`insert into users (id, email, name, referral_code)
        values (${`usr_bench_${i}`}, ${`bench-${i}@example.com`}, 'bench', ${`BENCH${i}`})`;
      await sql`insert into credit_ledger (id, user_id, amount_micro_usd, reason)
        values (${`led_bench_${i}`}, ${`usr_bench_${i}`}, ${1_000_000_000_000}, 'bench')`;
    }
    const token = tokens[0]!;
    let next = 0;
    const messages = [{ role: "user", content: "Say hello" }];
    const headers = { "content-type": "application/json", authorization: `Bearer ${token}` };
    const json = (stream: boolean) => ({
      method: "POST" as const,
      headers,
      body: JSON.stringify({ model: "openai/gpt-4o-mini", messages, stream }),
    });
    const directJson = (stream: boolean) => ({
      method: "POST" as const,
      headers: { "content-type": "application/json", authorization: "Bearer bench" },
      body: JSON.stringify({ model: "gpt-4o-mini", messages, stream }),
    });
    const modelsRow = await measure(
      "GET /api/ai/v1/models (token + catalog)",
      `${web.url}/api/ai/v1/models`,
      200,
      { headers },
    );
    console.warn(
      `\n${modelsRow.name}: ${modelsRow.rps.toFixed(0)} req/s, p99 ${modelsRow.p99} ms, ${modelsRow.errors} errors`,
    );
    const directUrl = `${provider.url}/v1/chat/completions`;
    const viaUrl = `${web.url}/api/ai/v1/chat/completions`;
    const floorUrl = `${bareProxy.url}/v1/chat/completions`;
    const rounds = (stream: boolean) =>
      latencyRounds(directUrl, directJson(stream), floorUrl, viaUrl, json(stream), stream);
    // Latency one request at a time first, on a settled process (each call is still metered).
    for (const stream of [false, true]) {
      latency.push({ name: stream ? "stream" : "JSON", ...(await rounds(stream)) });
    }
    for (const stream of [false, true]) {
      const kind = stream ? "stream" : "JSON";
      aiRows.push(
        await measure(
          `fake provider directly (${kind})`,
          directUrl,
          200,
          directJson(stream),
          provider,
        ),
      );
      aiRows.push(
        await measure(
          `/api/ai/v1/chat/completions (${kind})`,
          viaUrl,
          200,
          {
            ...json(stream),
            // Each connection is one agent with its own token.
            setupClient: (client) => {
              next += 1;
              client.setHeaders({ ...headers, authorization: `Bearer ${tokens[next % agents]}` });
            },
          },
          web,
        ),
      );
    }
    // And once more right after the bursts, while the web process flushes their metering backlog.
    latency.push({ name: "stream*", ...(await rounds(true)) });
    // Exact holds (issue 24): 20 concurrent calls of a user whose balance pays for a few, each
    // answer using its whole max_tokens. Affordable: the calls the balance pays at what they
    // cost (the calls before the last only need their cost, the last its hold).
    for (const maxTokens of [1000, undefined]) {
      const user = `usr_bench_burst_${maxTokens ?? "none"}`;
      const burstToken = `ait_${randomBytes(24).toString("base64url")}`;
      await sql`insert into ai_instance_tokens (token_hash, user_id, instance_id)
        values (${createHash("sha256").update(burstToken).digest("hex")}, ${user}, ${`ins_${user}`})`;
      await sql`insert into users (id, email, name, referral_code)
        values (${user}, ${`${user}@example.com`}, 'bench', ${user})`;
      const balance = 3750; // five calls of 1,000 prompt + 1,000 completion tokens of gpt-4o-mini
      await sql`insert into credit_ledger (id, user_id, amount_micro_usd, reason)
        values (${`led_${user}`}, ${user}, ${balance}, 'bench')`;
      const statuses = await Promise.all(
        Array.from({ length: 20 }, () =>
          fetch(viaUrl, {
            method: "POST",
            headers: { ...headers, authorization: `Bearer ${burstToken}` },
            body: JSON.stringify({
              model: "openai/gpt-4o-mini",
              messages,
              user: "bench-burst",
              ...(maxTokens ? { max_tokens: maxTokens } : {}),
            }),
          }).then(async (r) => {
            await r.arrayBuffer();
            return r.status;
          }),
        ),
      );
      await waitForMetering(sql, user, statuses.filter((s) => s === 200).length);
      const [u] = await sql<{ cost: number; uncollected: number }[]>`
        select coalesce(sum(cost_micro_usd), 0)::bigint as cost,
          coalesce(sum(uncollected_micro_usd), 0)::bigint as uncollected
        from ai_usage where user_id = ${user} and status = 'ok'`;
      const served = statuses.filter((s) => s === 200).length;
      const spent = Number(u?.cost);
      // With a max_tokens every call costs the same: the balance pays floor(balance / cost).
      // Without, the layer sizes each call to what is left: the figure is the balance spent
      // (target 1.00 less one token's price).
      const perCall = served > 0 ? spent / served : 0;
      const affordable = maxTokens ? Math.floor(balance / perCall) : Number.NaN;
      burstRows.push({
        name: maxTokens ? "max_tokens 1000" : "no max_tokens",
        served,
        affordable,
        spentShare: spent / balance,
        uncollected: Number(u?.uncollected),
      });
    }
    // Metrics on and off (issue 51, decision 0202): the same read and AI rows on two fresh web processes,
    // one without METRICS_TOKEN (nothing recorded), one with it, in the order
    // off, on, on, off, so drift over the run falls on both alike; the figures are the means.
    if (process.env.BENCH_METRICS !== "0") {
      // Two fresh web processes, alike but for METRICS_TOKEN: equally warm when compared.
      const fresh = (extra: Record<string, string>) =>
        freePort().then((port) =>
          startNode("server.ts", port, "/api/health", {
            DATABASE_URL: databaseUrl,
            ...secrets,
            ...aiEnv,
            RATE_LIMIT_SCALE: "1000000",
            ...extra,
          }),
        );
      const webOff = await fresh({});
      const webMetrics = await fresh({ METRICS_TOKEN: randomBytes(16).toString("hex") });
      children.push(webOff, webMetrics);
      const read = metricsRead ?? { path: "/api/health", headers: {} };
      const cases = [
        { name: `GET ${read.path}`, path: read.path, status: 200, opts: { headers: read.headers } },
        {
          name: "/api/ai/v1/chat/completions (JSON)",
          path: "/api/ai/v1/chat/completions",
          status: 200,
          opts: {
            ...json(false),
            // One agent (token) per connection, as in the AI rows above.
            setupClient: (client: { setHeaders(h: Record<string, string>): void }) => {
              next += 1;
              client.setHeaders({ ...headers, authorization: `Bearer ${tokens[next % agents]}` });
            },
          },
        },
      ];
      const mean = (a: Row, b: Row): Row => ({
        name: a.name,
        rps: (a.rps + b.rps) / 2,
        p99: (a.p99 + b.p99) / 2,
        errors: a.errors + b.errors,
        ...(a.cpuPerRequest !== undefined && b.cpuPerRequest !== undefined
          ? { cpuPerRequest: (a.cpuPerRequest + b.cpuPerRequest) / 2 }
          : {}),
      });
      for (const c of cases) {
        const at = (server: Child, label: string) =>
          measure(
            `${c.name}, metrics ${label}`,
            `${server.url}${c.path}`,
            c.status,
            c.opts,
            server,
            () => waitMeteringIdle(sql),
          );
        const off1 = await at(webOff, "off");
        const on1 = await at(webMetrics, "on");
        const on2 = await at(webMetrics, "on");
        const off2 = await at(webOff, "off");
        metricsRows.push({ name: c.name, off: mean(off1, off2), on: mean(on1, on2) });
      }
    }
    const [metered] = await sql<{ n: number }[]>`select count(*)::int as n from ai_usage`;
    console.warn(`\nmetered calls recorded in ai_usage: ${metered?.n}`);
    await sql.end();
  }
} finally {
  await Promise.all(children.map((c) => c.stop()));
  await cluster.stop();
  await rm(cluster.dir, { recursive: true, force: true });
}

const pad = (s: string, n: number) => s.padEnd(n);
function table(title: string, list: Row[], baseline: (r: Row) => Row) {
  console.warn(`\n${title}\n`);
  const cpu = list.some((r) => r.cpuPerRequest !== undefined);
  console.warn(
    `${pad("target", 44)} ${pad("req/s", 9)} ${pad("ratio", 7)} ${pad("p99 ms", 8)} ${pad("errors", 7)}${cpu ? " CPU ms/req  DB ms/req" : ""}`,
  );
  for (const r of list) {
    console.warn(
      `${pad(r.name, 44)} ${pad(r.rps.toFixed(0), 9)} ${pad(`${(r.rps / baseline(r).rps).toFixed(2)}×`, 7)} ${pad(String(r.p99), 8)} ${pad(String(r.errors), 7)}${cpu ? ` ${pad(r.cpuPerRequest?.toFixed(3) ?? "-", 11)} ${r.dbCpuPerRequest?.toFixed(3) ?? "-"}` : ""}`,
    );
  }
}
console.warn(
  `\n${CONNECTIONS} connections, ${DURATION} s each, ${os.cpus().length} cores, Node ${process.version}`,
);
if (rows.length) table("platform against bare node:http", rows, () => rows[0]!);
if (readRows.length) readsTable(readRows, rows[0]!);
if (authRows.length) table("sign-in against GET /api/health", authRows, () => authRows[0]!);
if (replicaRows.length) {
  // Each two-replica row against the one-replica row before it.
  table(
    "web replicas: the same load on one web process, then split between two (one database)",
    replicaRows,
    (r) => replicaRows[Math.floor(replicaRows.indexOf(r) / 2) * 2]!,
  );
}
function readsTable(list: Row[], baseline: Row) {
  console.warn(
    `\nauthenticated reads against bare node:http (${baseline.rps.toFixed(0)} req/s; targets: ratio ≥ ${READ_TARGET_RATIO}×, p99 < ${READ_TARGET_P99_MS} ms)\n`,
  );
  console.warn(
    `${pad("target", 40)} ${pad("req/s", 8)} ${pad("ratio", 7)} ${pad("target", 8)} ${pad("p99 ms", 7)} ${pad("target", 8)} ${pad("errors", 7)} ${pad("CPU ms/req", 11)} ${pad("DB ms/req", 10)} met`,
  );
  for (const r of list) {
    const ratio = r.rps / baseline.rps;
    const met = ratio >= READ_TARGET_RATIO && r.p99 < READ_TARGET_P99_MS && r.errors === 0;
    console.warn(
      `${pad(r.name, 40)} ${pad(r.rps.toFixed(0), 8)} ${pad(`${ratio.toFixed(2)}×`, 7)} ${pad(`≥ ${READ_TARGET_RATIO}×`, 8)} ${pad(String(r.p99), 7)} ${pad(`< ${READ_TARGET_P99_MS}`, 8)} ${pad(String(r.errors), 7)} ${pad(r.cpuPerRequest?.toFixed(3) ?? "-", 11)} ${pad(r.dbCpuPerRequest?.toFixed(3) ?? "-", 10)} ${met ? "yes" : "no"}`,
    );
  }
}

// Each AI row is compared with the direct call of its kind just before it.
if (aiRows.length)
  table(
    "AI layer: agents' endpoint against the fake provider called directly",
    aiRows,
    (r) => aiRows[Math.floor(aiRows.indexOf(r) / 2) * 2]!,
  );
if (metricsRows.length) {
  console.warn(
    "\nPrometheus metrics on against off (same run, means of off/on/on/off; goal: under 3 % of throughput)\n",
  );
  console.warn(
    `${pad("row", 40)} ${pad("off req/s", 10)} ${pad("on req/s", 10)} ${pad("cost", 8)} ${pad("p99 off/on ms", 14)} CPU ms/req off/on`,
  );
  for (const r of metricsRows) {
    const cost = 1 - r.on.rps / r.off.rps;
    const cpu = (row: Row) => row.cpuPerRequest?.toFixed(3) ?? "-";
    console.warn(
      `${pad(r.name, 40)} ${pad(r.off.rps.toFixed(0), 10)} ${pad(r.on.rps.toFixed(0), 10)} ${pad(`${(cost * 100).toFixed(1)} %`, 8)} ${pad(`${r.off.p99.toFixed(1)}/${r.on.p99.toFixed(1)}`, 14)} ${cpu(r.off)}/${cpu(r.on)}`,
    );
  }
  // The recording itself, timed in this process: the rows above compare two processes, whose
  // spread is wider than the goal.
  const recording = await recordingCost();
  const share = (ns: number, row: Row | undefined) =>
    row?.cpuPerRequest ? `${((ns / (row.cpuPerRequest * 1e6)) * 100).toFixed(3)} %` : "-";
  const [readRow, aiRow] = metricsRows;
  console.warn(
    `recording per request: ${recording.httpNs.toFixed(0)} ns (${share(recording.httpNs, readRow?.off)} of the read's CPU); an AI call ${recording.aiNs.toFixed(0)} ns (${share(recording.aiNs, aiRow?.off)} of its CPU)`,
  );
}
if (latency.length) {
  console.warn(
    "\nAI layer, one request at a time (ms p50/p99; stream: time to first bytes; added = minus direct)\n",
  );
  console.warn(
    `${pad("kind", 8)} ${pad("direct", 12)} ${pad("bare hop added", 15)} ${pad("platform added", 15)} ${pad("ratio p50", 10)} x-overhead-ms`,
  );
  const f = (a: number, b: number) => `${a.toFixed(2)}/${b.toFixed(2)}`;
  for (const l of latency) {
    const hop = { p50: l.floor.p50 - l.direct.p50, p99: l.floor.p99 - l.direct.p99 };
    const added = { p50: l.via.p50 - l.direct.p50, p99: l.via.p99 - l.direct.p99 };
    console.warn(
      `${pad(l.name, 8)} ${pad(f(l.direct.p50, l.direct.p99), 12)} ${pad(f(hop.p50, hop.p99), 15)} ${pad(f(added.p50, added.p99), 15)} ${pad(`${(added.p50 / hop.p50).toFixed(2)}×`, 10)} ${f(l.overhead.p50, l.overhead.p99)}`,
    );
  }
  console.warn(
    "bare hop: a Node proxy that only forwards (bench/bare-proxy.ts); ratio: platform added / bare hop added\n* right after the throughput bursts, while their metering backlog is flushed",
  );
}

if (burstRows.length) {
  console.warn(
    "\nAI exact holds: 20 concurrent calls, a balance that pays for 5 (target: served/affordable 1.00, uncollected 0)\n",
  );
  console.warn(
    `${pad("case", 18)} ${pad("served", 7)} ${pad("affordable", 11)} ${pad("ratio", 7)} ${pad("target", 7)} ${pad("spent/balance", 14)} uncollected µ$`,
  );
  for (const b of burstRows) {
    console.warn(
      `${pad(b.name, 18)} ${pad(String(b.served), 7)} ${pad(Number.isNaN(b.affordable) ? "-" : String(b.affordable), 11)} ${pad(Number.isNaN(b.affordable) ? "-" : (b.served / b.affordable).toFixed(2), 7)} ${pad(Number.isNaN(b.affordable) ? "-" : "1.00", 7)} ${pad(b.spentShare.toFixed(3), 14)} ${b.uncollected}`,
    );
  }
}

// The agent runtime's and chat turn's figures (Docker; each skipped with a message without an
// engine), each in its own process: they set up their own database and environment, which
// module state cached here (the database pool, env) would otherwise carry across.
const part = (file: string) =>
  new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(import.meta.dirname, file)], {
      stdio: "inherit",
    });
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`bench/${file} exited with ${code}`)),
    );
  });
if (process.env.BENCH_RUNTIME !== "0" && only !== "reads") await part("runtime.ts");
if (process.env.BENCH_TALK !== "0" && only !== "reads") await part("talk.ts");
if (process.env.BENCH_INGRESS !== "0" && only !== "reads") await part("ingress.ts");
if (process.env.BENCH_SOCKETS !== "0" && only !== "reads") await part("live-sockets.ts");
if (process.env.BENCH_SWARM !== "0" && only !== "reads") await part("swarm.ts");
if (process.env.BENCH_SLEEP !== "0" && only !== "reads") await part("sleep.ts");
if (process.env.BENCH_GATEWAY_MEMORY !== "0" && only !== "reads") await part("gateway-memory.ts");
if (process.env.BENCH_STORAGE !== "0" && only !== "reads") await part("storage.ts");
if (process.env.BENCH_BOOT_WEIGHT !== "0" && only !== "reads") await part("boot-weight.ts");
