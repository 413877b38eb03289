import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import postgres from "postgres";
import {
  type Cluster,
  freePort,
  startCluster,
  withDatabase,
} from "../../app/server/platform/embedded-postgres.server.ts";
import { type Child, root, startNode } from "../servers.ts";

// The platform as `npm start` runs it (start.ts: build if needed, migrations, web and worker
// supervised), against a PostgreSQL the soak runs itself (the "external database" case, so the
// chaos loop can restart it) and the local OpenAI-compatible stand-in (bench/fake-openai.ts).

const run = promisify(execFile);

export interface Platform {
  url: string;
  port: number;
  deployment: string;
  network: string;
  databaseUrl: string;
  sql: postgres.Sql;
  provider: Child;
  start: ChildProcess;
  /** The pid of the supervised child (`web` or `worker`), or undefined while it is down. */
  childPid(name: "web" | "worker"): Promise<number | undefined>;
  /** Whether the database is start.ts's embedded server (SOAK_DATABASE=embedded). */
  embedded: boolean;
  /**
   * An external server: stopped (fast) for `downMs` and started again. The embedded one: killed
   * (SIGKILL of the postmaster), and start.ts's watch starts it again; resolves once it answers.
   */
  restartDatabase(downMs: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startPlatform(log: (line: string) => void): Promise<Platform> {
  const deployment = `soak-${randomBytes(3).toString("hex")}`;
  const network = `agent-${deployment}`;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agent-soak-"));
  // SOAK_DATABASE=embedded: no DATABASE_URL, so start.ts runs its embedded server under
  // DATA_DIR (the bare `npm start` case); otherwise an external one the soak runs.
  const embedded = process.env.SOAK_DATABASE === "embedded";
  const base = existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir();
  const pgDir = embedded
    ? path.join(dataDir, "postgres")
    : path.join(base, `agent-soak-pg-${process.pid}`);
  const settings = { fsync: "off", synchronous_commit: "off" };
  let cluster: Cluster | undefined;
  let databaseUrl = "";
  if (!embedded) {
    cluster = await startCluster({ dir: pgDir, settings });
    const admin = postgres(cluster.url, { max: 1, onnotice: () => {} });
    await admin.unsafe("create database soak");
    await admin.end();
    databaseUrl = withDatabase(cluster.url, "soak");
  }
  const pgPort = cluster?.port;
  let embeddedDir: string | undefined;

  const provider = await startNode("bench/fake-openai.ts", await freePort(), "/v1/models");
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const { DATABASE_URL_FILE: _file, ...inherited } = process.env;
  const start = spawn(process.execPath, [path.join(root, "start.ts")], {
    cwd: root,
    env: {
      ...inherited,
      ...(embedded ? {} : { DATABASE_URL: databaseUrl }),
      // SOAK_STORAGE_ROOT: a btrfs root (deploy/host-storage.sh) so the disk fault meets a real
      // quota (SOAK_STORAGE_GB, default 0.5); unset, the fill stops at the soak's bound.
      ...(process.env.SOAK_STORAGE_ROOT
        ? {
            STORAGE_ROOT: process.env.SOAK_STORAGE_ROOT,
            STORAGE_BASE_GB: process.env.SOAK_STORAGE_GB ?? "0.5",
          }
        : {}),
      PORT: String(port),
      HOST: "127.0.0.1",
      APP_URL: url,
      LOG_LEVEL: process.env.LOG_LEVEL ?? "warn",
      DATA_DIR: dataDir,
      SESSION_SECRET: randomBytes(32).toString("hex"),
      SEALING_KEY: randomBytes(32).toString("hex"),
      OPENAI_BASE_URL: `${provider.url}/v1`,
      OPENAI_API_KEY: "soak",
      RUNTIME_DEPLOYMENT: deployment,
      RUNTIME_NETWORK: network,
      RUNTIME_MAX_CPUS: "1",
      // One client address registers every user and sends every request.
      RATE_LIMIT_SCALE: "1000",
      AI_DAILY_LIMIT_USD: "1000",
      // Idle agents go to sleep within the run; a chat wakes them.
      SLEEP_IDLE_SECONDS: process.env.SOAK_SLEEP_IDLE_SECONDS ?? "45",
      SLEEP_WATCH_INTERVAL_MS: "5000",
      // No warm pool unless asked: with it, N agents and the churning one would run N + 2
      // gateways at once (the pool refills after each adoption).
      RUNTIME_POOL_SIZE: process.env.SOAK_POOL_SIZE ?? "0",
    },
    stdio: ["ignore", "inherit", "pipe"],
  });
  // start.ts's own lines ([start] …) are the supervisor's restarts: part of the event log.
  start.stderr?.on("data", (chunk: Buffer) => {
    for (const line of chunk.toString("utf8").split("\n")) {
      if (line.startsWith("[start]")) log(line);
      else if (line.trim()) process.stderr.write(`${line}\n`);
    }
  });
  try {
    const deadline = Date.now() + 600_000; // a first `npm start` builds the web app
    for (;;) {
      if (start.exitCode !== null) throw new Error(`start.ts exited with ${start.exitCode}`);
      const up = await fetch(`${url}/api/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) break;
      if (Date.now() > deadline) throw new Error("the platform did not come up in 10 minutes");
      await new Promise((r) => setTimeout(r, 500));
    }
    // The embedded server start.ts made, found as start.ts finds it (its folder may be moved
    // where PostgreSQL's own user can reach it when the soak runs as root).
    if (embedded) {
      const found = await startCluster({ dir: pgDir });
      databaseUrl = withDatabase(found.url, "app");
      embeddedDir = found.dir;
    }
  } catch (error) {
    // Nothing of a platform that did not come up is left running.
    if (start.exitCode === null) {
      const exited = new Promise((r) => start.once("exit", r));
      start.kill("SIGINT");
      await exited;
    }
    await provider.stop();
    await cluster?.stop();
    throw error;
  }
  const sql = postgres(databaseUrl, { max: 2, onnotice: () => {} });

  const childPid = async (name: "web" | "worker") => {
    if (!start.pid) return undefined;
    const { stdout } = await run("ps", ["-o", "pid=,args=", "--ppid", String(start.pid)]).catch(
      () => ({ stdout: "" }),
    );
    const entry = name === "web" ? "server.ts" : "worker/index.ts";
    const line = stdout.split("\n").find((l) => l.includes(entry));
    return line ? Number(line.trim().split(/\s+/)[0]) : undefined;
  };

  return {
    url,
    port,
    deployment,
    network,
    databaseUrl,
    sql,
    provider,
    start,
    childPid,
    embedded,
    async restartDatabase(downMs) {
      if (embeddedDir) {
        const pidFile = path.join(embeddedDir, "data", "postmaster.pid");
        process.kill(Number((await readFile(pidFile, "utf8")).split("\n")[0]), "SIGKILL");
        const until = Date.now() + 60_000;
        for (;;) {
          const up = await sql`select 1`.then(
            () => true,
            () => false,
          );
          if (up) return;
          if (Date.now() > until) throw new Error("the embedded database was not back in 60 s");
          await new Promise((r) => setTimeout(r, 250));
        }
      }
      // The external server: stopped as an operator would and started again on its port.
      const running = cluster ?? (await startCluster({ dir: pgDir }));
      await running.stop();
      await new Promise((r) => setTimeout(r, downMs));
      cluster = await startCluster({ dir: pgDir, settings, port: pgPort });
    },
    async stop() {
      if (start.exitCode === null) {
        const exited = new Promise((r) => start.once("exit", r));
        start.kill("SIGINT");
        await exited;
      }
      await provider.stop();
      await sql.end({ timeout: 5 });
      // start.ts stopped the embedded server on its way out; an external one is the soak's.
      await cluster?.stop();
      await rm(pgDir, { recursive: true, force: true });
      if (embeddedDir) await rm(embeddedDir, { recursive: true, force: true });
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
