import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { closeDb, db, resolveDatabaseUrl } from "./app/server/platform/db.server.ts";
import { env } from "./app/server/platform/env.server.ts";
import { ensureQueueSchema } from "./app/server/platform/jobs.server.ts";
import { migrate } from "./db/migrate.ts";

// `npm start`: the whole platform on one machine — build if needed, the embedded database when
// no DATABASE_URL is set, migrations, then web and worker as two processes. Ctrl-C stops all.
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

const children = new Map<string, ChildProcess>();
let stopping = false;

function launch(name: string, entry: string) {
  const child = spawn(process.execPath, [path.join(root, entry)], {
    cwd: root,
    stdio: "inherit",
    env: { ...process.env, DATABASE_URL: database.url },
  });
  children.set(name, child);
  child.on("exit", (code, signal) => {
    children.delete(name);
    if (!stopping) {
      say(`${name} exited unexpectedly (${signal ?? code}); stopping everything`);
      void shutdown(1);
    } else if (children.size === 0) {
      void finish();
    }
  });
}

let exitCode = 0;
async function finish() {
  if (database.embedded) {
    say("stopping the embedded database");
    await database.embedded.stop().catch((error: unknown) => say(`database stop failed: ${error}`));
  }
  process.exit(exitCode);
}

async function shutdown(code: number) {
  if (stopping) return;
  stopping = true;
  exitCode = code;
  if (children.size === 0) return finish();
  for (const child of children.values()) child.kill("SIGTERM");
  // A child that ignores SIGTERM for too long is killed; nothing is left behind.
  setTimeout(() => {
    for (const child of children.values()) child.kill("SIGKILL");
  }, 35_000).unref();
}

process.on("SIGINT", () => void shutdown(0));
process.on("SIGTERM", () => void shutdown(0));

launch("web", "server.ts");
launch("worker", "worker/index.ts");
say(
  `platform starting at http://${config.HOST === "0.0.0.0" ? "localhost" : config.HOST}:${config.PORT} (Ctrl-C stops web, worker and database)`,
);
