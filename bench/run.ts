import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import postgres from "postgres";
import {
  freePort,
  startCluster,
  withDatabase,
} from "../app/server/platform/embedded-postgres.server.ts";
import { type Child, root, startNode } from "./servers.ts";

// `npm run bench`: throughput and p99 latency of the platform's endpoints against a baseline
// measured in the same run, reported as ratios. Each server runs in its own process; the load
// generator (autocannon, 50 connections) in this one.

const DURATION = Number(process.env.BENCH_SECONDS ?? 8);
const CONNECTIONS = 50;

interface Row {
  name: string;
  rps: number;
  p99: number;
  errors: number;
}

interface RequestOptions {
  method?: "GET" | "POST";
  headers?: Record<string, string>;
  body?: string;
}

async function measure(
  name: string,
  url: string,
  expectStatus = 200,
  request: RequestOptions = {},
): Promise<Row> {
  // A short warm-up lets the JIT and the connection pools settle before the measured run.
  await autocannon({ url, connections: CONNECTIONS, duration: 1, ...request });
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, ...request });
  const unexpected =
    expectStatus === 200
      ? r.non2xx
      : r.requests.sent - (r.statusCodeStats?.[String(expectStatus) as "404"]?.count ?? 0);
  const errors = r.errors + r.timeouts + Math.max(0, unexpected);
  return { name, rps: r.requests.average, p99: r.latency.p99, errors };
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
try {
  const bare = await startNode("bench/bare-health.ts", await freePort(), "/");
  children.push(bare);
  const web = await startNode("server.ts", await freePort(), "/api/health", {
    DATABASE_URL: databaseUrl,
  });
  children.push(web);
  const viaRemix = await startNode("server.ts", await freePort(), "/api/health", {
    DATABASE_URL: databaseUrl,
    API_FAST_PATH: "0",
  });
  children.push(viaRemix);

  rows.push(await measure("bare node:http, same JSON (baseline)", `${bare.url}/`));
  rows.push(await measure("GET /api/health through Remix's handler", `${viaRemix.url}/api/health`));
  rows.push(await measure("GET /api/health (fast path)", `${web.url}/api/health`));
  rows.push(
    await measure("GET /api/nope (fast path, 404, no database)", `${web.url}/api/nope`, 404),
  );
  rows.push(
    await measure("GET /api/nope through Remix's handler", `${viaRemix.url}/api/nope`, 404),
  );

  // The cost of authentication: GET /api/user (one indexed join per request) with an API key
  // and with a session cookie, against GET /api/health above; and sign-in (argon2id) per second.
  const account = await prepareAccount(web.url);
  rows.push(
    await measure("GET /api/user with an API key", `${web.url}/api/user`, 200, {
      headers: { authorization: `Bearer ${account.key}` },
    }),
  );
  rows.push(
    await measure("GET /api/user with a session cookie", `${web.url}/api/user`, 200, {
      headers: { cookie: account.cookie },
    }),
  );
  rows.push(
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
} finally {
  await Promise.all(children.map((c) => c.stop()));
  await cluster.stop();
  await rm(cluster.dir, { recursive: true, force: true });
}

const base = rows[0]!;
const health = rows.find((r) => r.name === "GET /api/health (fast path)")!;
const pad = (s: string, n: number) => s.padEnd(n);
console.warn(
  `\n${CONNECTIONS} connections, ${DURATION} s each, ${os.cpus().length} cores, Node ${process.version}\n`,
);
console.warn(
  `${pad("target", 44)} ${pad("req/s", 9)} ${pad("ratio", 7)} ${pad("vs health", 10)} ${pad("p99 ms", 8)} errors`,
);
for (const r of rows) {
  console.warn(
    `${pad(r.name, 44)} ${pad(r.rps.toFixed(0), 9)} ${pad(`${(r.rps / base.rps).toFixed(2)}×`, 7)} ${pad(`${(r.rps / health.rps).toFixed(2)}×`, 10)} ${pad(String(r.p99), 8)} ${r.errors}`,
  );
}
