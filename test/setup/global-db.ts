import postgres from "postgres";
import type { TestProject } from "vitest/node";
import { withDatabase } from "../../app/server/platform/embedded-postgres.server.ts";
import { migrate } from "../../db/migrate.ts";
import { startTestCluster, stopTestCluster, TEMPLATE_DB } from "./cluster.ts";

declare module "vitest" {
  export interface ProvidedContext {
    adminDatabaseUrl: string;
  }
}

export default async function setup(project: TestProject) {
  const tc = await startTestCluster();
  const admin = postgres(tc.adminUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${TEMPLATE_DB}`);
  await admin.end();

  const templateUrl = withDatabase(tc.adminUrl, TEMPLATE_DB);
  const sql = postgres(templateUrl, { max: 1, onnotice: () => {} });
  await migrate(sql);
  await sql.end();
  // pg-boss creates its schema and the catalog's queues on start.
  process.env.DATABASE_URL = templateUrl;
  process.env.LOG_LEVEL ??= "silent";
  const { ensureQueueSchema } = await import("../../app/server/platform/jobs.server.ts");
  await ensureQueueSchema();
  delete process.env.DATABASE_URL;

  project.provide("adminDatabaseUrl", tc.adminUrl);
  return async () => stopTestCluster(tc);
}
