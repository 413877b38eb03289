import { spawn } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { keepDatabaseRunning } from "./app/server/platform/database-watch.server.ts";
import { closeDb, db, resolveDatabaseUrl } from "./app/server/platform/db.server.ts";
import { env } from "./app/server/platform/env.server.ts";
import { ensureQueueSchema } from "./app/server/platform/jobs.server.ts";
import { openFilesLimit } from "./app/server/platform/open-files.server.ts";
import { supervise } from "./app/server/platform/supervisor.server.ts";
import { migrate } from "./db/migrate.ts";

// `npm start`: the whole platform on one machine — build if needed, the embedded database when
// no DATABASE_URL is set, migrations, then web and worker as two supervised processes
// (restarted with back-off when they crash). Ctrl-C stops all, in order.
const root = path.dirname(fileURLToPath(import.meta.url));
const say = (line: string) => process.stderr.write(`[start] ${line}\n`);

function newest(dir: string): number {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return latest;
}

function needsBuild(): boolean {
  const marker = path.join(root, "build/index.js");
  if (!existsSync(marker)) return true;
  const sources = Math.max(
    newest(path.join(root, "app")),
    statSync(path.join(root, "remix.config.js")).mtimeMs,
    statSync(path.join(root, "package.json")).mtimeMs,
  );
  return sources > statSync(marker).mtimeMs;
}

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: root, stdio: "inherit" });
    child.on("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} exited ${code}`)),
    );
  });
}

const config = env();
if (needsBuild()) {
  say("building the web app…");
  await run(process.execPath, [
    path.join(root, "node_modules/@remix-run/dev/dist/cli.js"),
    "build",
  ]);
}
const database = await resolveDatabaseUrl();
await migrate(db());
await ensureQueueSchema();
await closeDb();

// Web first: it stops taking requests and settles its metering while the worker still runs;
// then the worker finishes or releases its jobs; the database goes last.
// The children get the resolved URL itself: DATABASE_URL beside DATABASE_URL_FILE is refused.
const { DATABASE_URL_FILE: _resolved, ...inherited } = process.env;
const supervisor = supervise({
  cwd: root,
  env: { ...inherited, DATABASE_URL: database.url, START_SUPERVISED: "1" },
  log: say,
  children: [
    { name: "web", args: [path.join(root, "server.ts")], stopTimeoutMs: 15_000 },
    // Its grace period, then the release of what still runs, then the pool's close.
    {
      name: "worker",
      args: [path.join(root, "worker/index.ts")],
      stopTimeoutMs: config.WORKER_STOP_GRACE_MS + 15_000,
    },
  ],
});

// The embedded server is pg_ctl's, not a child: started again here when it dies.
const databaseWatch =
  database.embedded &&
  keepDatabaseRunning(database.embedded, {
    onEvent: (event) => {
      if (event.kind === "down") say("the embedded database stopped; starting it again");
      if (event.kind === "restarted") say(`the embedded database is back (${event.downMs} ms)`);
      if (event.kind === "restart-failed") {
        say(`the embedded database did not start (${event.error}); again in ${event.retryInMs} ms`);
      }
    },
  });

let stopping = false;
async function shutdown() {
  if (stopping) return;
  stopping = true;
  databaseWatch?.stop();
  await supervisor.stop();
  if (database.embedded) {
    say("stopping the embedded database");
    await database.embedded.stop().catch((error: unknown) => say(`database stop failed: ${error}`));
  }
  process.exit(0);
}

process.on("SIGINT", () => void shutdown());
process.on("SIGTERM", () => void shutdown());

say(`platform starting at ${config.APP_URL} (Ctrl-C stops web, worker and database)`);
// Node raised this process's soft open-files limit to the hard one as it started, and each child
// does the same: the web can hold about this many connections (docs/operations.md).
const openFiles = openFilesLimit();
if (openFiles) say(`open files per process: ${openFiles.soft} (hard limit ${openFiles.hard})`);
