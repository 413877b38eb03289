import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import {
  type Cluster,
  startCluster,
  withDatabase,
} from "../app/server/platform/embedded-postgres.server.ts";

/** A bench's own embedded PostgreSQL, with one migrated database (and its job queue) that DATABASE_URL names. */
export interface BenchDatabase {
  cluster: Cluster;
  databaseUrl: string;
  /** Stops the server and removes its files. */
  stop(): Promise<void>;
}

/**
 * The set-up the benches share: a server in memory (/dev/shm where there is one) without fsync,
 * since a bench measures the platform, not the disk; the database `bench_<name>` migrated and
 * named in DATABASE_URL before the platform's modules read it.
 */
export async function startBenchDatabase(
  name: string,
  settings: Record<string, string> = {},
): Promise<BenchDatabase> {
  const base = existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir();
  const cluster = await startCluster({
    dir: path.join(base, `agent-bench-${name}-pg-${process.pid}`),
    settings: { fsync: "off", synchronous_commit: "off", ...settings },
  });
  const stop = async () => {
    await cluster.stop();
    await rm(cluster.dir, { recursive: true, force: true });
  };
  try {
    const admin = postgres(cluster.url, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database bench_${name}`);
    await admin.end();
    const databaseUrl = withDatabase(cluster.url, `bench_${name}`);
    process.env.DATABASE_URL = databaseUrl;
    const { db } = await import("../app/server/platform/db.server.ts");
    const { migrate } = await import("../db/migrate.ts");
    await migrate(db());
    // The job queue's tables, as `npm start` makes them: provisioning reads its line (0231).
    const { ensureQueueSchema } = await import("../app/server/platform/jobs.server.ts");
    await ensureQueueSchema();
    return { cluster, databaseUrl, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
