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

async function measure(name: string, url: string, expectStatus = 200): Promise<Row> {
  // A short warm-up lets the JIT and the connection pools settle before the measured run.
  await autocannon({ url, connections: CONNECTIONS, duration: 1 });
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION });
  const unexpected =
    expectStatus === 200
      ? r.non2xx
      : r.requests.sent - (r.statusCodeStats?.[String(expectStatus) as "404"]?.count ?? 0);
  const errors = r.errors + r.timeouts + Math.max(0, unexpected);
  return { name, rps: r.requests.average, p99: r.latency.p99, errors };
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
} finally {
  await Promise.all(children.map((c) => c.stop()));
  await cluster.stop();
  await rm(cluster.dir, { recursive: true, force: true });
}

const base = rows[0]!;
const pad = (s: string, n: number) => s.padEnd(n);
console.warn(
  `\n${CONNECTIONS} connections, ${DURATION} s each, ${os.cpus().length} cores, Node ${process.version}\n`,
);
console.warn(
  `${pad("target", 44)} ${pad("req/s", 9)} ${pad("ratio", 7)} ${pad("p99 ms", 8)} errors`,
);
for (const r of rows) {
  console.warn(
    `${pad(r.name, 44)} ${pad(r.rps.toFixed(0), 9)} ${pad(`${(r.rps / base.rps).toFixed(2)}×`, 7)} ${pad(String(r.p99), 8)} ${r.errors}`,
  );
}
