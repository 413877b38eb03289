import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Sql } from "../app/server/platform/db.server.ts";

export const migrationsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "migrations");
// Any constant works; it only has to be the same for every process that migrates.
const LOCK_KEY = 727_100_001;

export interface MigrationResult {
  applied: string[];
}

/**
 * Applies db/migrations/*.sql in name order, each once and in its own transaction, under a
 * session advisory lock so concurrent starters (web and worker) never race.
 */
export async function migrate(sql: Sql, dir = migrationsDir): Promise<MigrationResult> {
  const files = (await readdir(dir)).filter((f) => /^\d{4}_.+\.sql$/.test(f)).sort();
  const applied: string[] = [];
  await sql.reserve().then(async (conn) => {
    try {
      await conn`select pg_advisory_lock(${LOCK_KEY})`;
      await conn`create table if not exists schema_migrations (
        name text primary key,
        applied_at timestamptz not null default now()
      )`;
      const done = new Set(
        (await conn<{ name: string }[]>`select name from schema_migrations`).map((r) => r.name),
      );
      for (const file of files) {
        if (done.has(file)) continue;
        const text = await readFile(path.join(dir, file), "utf8");
        await conn.unsafe("begin");
        try {
          await conn.unsafe(text);
          await conn`insert into schema_migrations (name) values (${file})`;
          await conn.unsafe("commit");
        } catch (error) {
          await conn.unsafe("rollback");
          throw new Error(`Migration ${file} failed: ${(error as Error).message}`, {
            cause: error,
          });
        }
        applied.push(file);
      }
    } finally {
      await conn`select pg_advisory_unlock(${LOCK_KEY})`.catch(() => {});
      conn.release();
    }
  });
  return { applied };
}

// `npm run db:migrate`
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { closeDb, db, resolveDatabaseUrl } = await import("../app/server/platform/db.server.ts");
  const { ensureQueueSchema } = await import("../app/server/platform/jobs.server.ts");
  const { embedded } = await resolveDatabaseUrl();
  const { applied } = await migrate(db());
  await ensureQueueSchema();
  console.warn(applied.length ? `applied: ${applied.join(", ")}` : "database is up to date");
  await closeDb();
  if (embedded?.started) await embedded.stop();
}
