import { spawn } from "node:child_process";
import { mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import postgres from "postgres";
import { startCluster } from "../app/server/platform/embedded-postgres.server.ts";
import { parseEnv } from "../app/server/platform/env.server.ts";

// The platform image's `db` role (deploy/stack.yml): the embedded PostgreSQL of `npm start`,
// listening on every address of the container (the stack's overlay) on 5432, its cluster on
// DATA_DIR (a named volume). Web and worker connect as role `app` to database `app` with
// POSTGRES_PASSWORD (a Docker secret, POSTGRES_PASSWORD_FILE); the superuser keeps its own
// random password and is reachable from inside the container only.

const PORT = 5432;
const say = (line: string) => process.stderr.write(`[db] ${line}\n`);

// Production requires POSTGRES_PASSWORD here, not the app's secrets (this process has none).
const config = parseEnv(process.env, "db");
const password = config.POSTGRES_PASSWORD;
if (!password) throw new Error("The db role needs POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE)");

const dir = path.resolve(config.DATA_DIR, "postgres");
await mkdir(dir, { recursive: true });
const hbaFile = path.join(dir, "pg_hba.serve.conf");
await writeFile(
  hbaFile,
  [
    "# written by db/serve.ts at every start",
    "host all postgres 127.0.0.1/32 scram-sha-256",
    "host app app 0.0.0.0/0 scram-sha-256",
    "host app app ::/0 scram-sha-256",
    "",
  ].join("\n"),
);
// A container starts with no server running: a postmaster.pid is a previous container's, and its
// pid may now be another process here (pg_ctl would take the cluster as running). One db task
// per volume (the stack's replicas: 1, stop-first updates) keeps this safe.
await rm(path.join(dir, "data", "postmaster.pid"), { force: true });

const cluster = await startCluster({
  dir,
  port: PORT,
  settings: { listen_addresses: "*", hba_file: hbaFile, max_connections: "300" },
});
say(`PostgreSQL listening on port ${PORT} (cluster in ${cluster.dir})`);
// The server's log on this process's output: `docker service logs` shows it.
const tail = spawn("tail", ["-F", "-n", "20", path.join(cluster.dir, "postgres.log")], {
  stdio: ["ignore", "inherit", "inherit"],
});

const admin = postgres(cluster.url, { max: 1, onnotice: () => {} });
// DDL takes no bind parameters: the password goes in as a quoted literal (standard strings).
const literal = `'${password.replaceAll("'", "''")}'`;
const [role] = await admin`select 1 from pg_roles where rolname = 'app'`;
await admin.unsafe(`${role ? "alter" : "create"} role app login password ${literal}`);
const [database] = await admin`select 1 from pg_database where datname = 'app'`;
if (!database) await admin.unsafe("create database app owner app");
else await admin.unsafe("alter database app owner to app");
await admin.end();
say("role app and database app ready (PostgreSQL 15+: the owner owns schema public)");

// Alive while the server answers; a server that died ends the task so the swarm restarts it.
const probe = postgres(cluster.url, { max: 1, onnotice: () => {}, connect_timeout: 5 });
let failures = 0;
const watch = setInterval(() => {
  probe`select 1`.then(
    () => {
      failures = 0;
    },
    (error: unknown) => {
      failures += 1;
      say(`probe failed (${failures}): ${(error as Error).message}`);
      if (failures >= 3) void stop(1);
    },
  );
}, 10_000);

let stopping = false;
async function stop(code: number) {
  if (stopping) return;
  stopping = true;
  clearInterval(watch);
  say("stopping PostgreSQL");
  await probe.end({ timeout: 1 }).catch(() => {});
  await cluster.stop().catch((error: unknown) => say(`stop failed: ${error}`));
  tail.kill();
  process.exit(code);
}
process.on("SIGTERM", () => void stop(0));
process.on("SIGINT", () => void stop(0));
