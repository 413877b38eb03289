import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import {
  type Cluster,
  startCluster,
  withDatabase,
} from "../../app/server/platform/embedded-postgres.server.ts";

// One PostgreSQL cluster per test run, on tmpfs with durability off; a migrated template
// database that every test file clones (CREATE DATABASE … TEMPLATE, tens of milliseconds).

export const TEMPLATE_DB = "app_template";

export interface TestCluster {
  cluster: Cluster;
  dir: string;
  /** Connection URL of the `postgres` database of the cluster. */
  adminUrl: string;
}

export async function startTestCluster(): Promise<TestCluster> {
  const base = existsSync("/dev/shm") ? "/dev/shm" : os.tmpdir();
  const dir = path.join(
    base,
    `agent-platform-test-${process.pid}-${randomBytes(3).toString("hex")}`,
  );
  const cluster = await startCluster({
    dir,
    settings: { fsync: "off", synchronous_commit: "off", full_page_writes: "off" },
  });
  return { cluster, dir: cluster.dir, adminUrl: cluster.url };
}

export async function stopTestCluster(tc: TestCluster): Promise<void> {
  await tc.cluster.stop();
  await rm(tc.dir, { recursive: true, force: true });
}

/** Creates a fresh database cloned from the template and returns its URL. */
export async function cloneDatabase(adminUrl: string, name?: string): Promise<string> {
  const db = name ?? `t_${randomBytes(6).toString("hex")}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${db} template ${TEMPLATE_DB} strategy file_copy`);
  } finally {
    await admin.end();
  }
  return withDatabase(adminUrl, db);
}
