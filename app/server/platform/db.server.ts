import path from "node:path";
import postgres from "postgres";
import { type Cluster, startCluster, withDatabase } from "./embedded-postgres.server.ts";
import { env, resetEnvCache } from "./env.server.ts";
import { logger } from "./logger.server.ts";

export type Sql = postgres.Sql;

let client: Sql | undefined;
let lockClient: Sql | undefined;

function connect(max: number, name: string): Sql {
  const { DATABASE_URL } = env();
  if (!DATABASE_URL) throw new Error("DATABASE_URL is not set (call resolveDatabaseUrl first)");
  return postgres(DATABASE_URL, {
    max,
    onnotice: () => {},
    connect_timeout: 5,
    connection: { application_name: name },
    // int8 columns (counters, epoch ms) as numbers: they stay far below 2^53.
    types: {
      int8: {
        to: 20,
        from: [20],
        serialize: (x: number) => String(x),
        parse: (x: string) => Number(x),
      },
    },
  });
}

/** The process-wide connection pool. Call `resolveDatabaseUrl()` once at boot before this. */
export function db(): Sql {
  client ??= connect(env().DATABASE_POOL_MAX, `agent-platform:${process.pid}`);
  return client;
}

/**
 * The pool of the connections that hold session locks (session-lock.server.ts, the wake
 * slots), apart from db()'s: a holder runs its queries on db(), so holders that took every
 * connection of one shared pool waited for each other's queries for good (the soak, decision
 * 0237: nine wakes held the worker's ten connections).
 */
export function lockDb(): Sql {
  lockClient ??= connect(env().DATABASE_LOCK_POOL_MAX, `agent-platform:${process.pid}:locks`);
  return lockClient;
}

const closers = new Set<() => Promise<void>>();

/** Runs `close` (once) when the pool closes: for connections kept beside the pool (listeners). */
export function onDbClose(close: () => Promise<void>): void {
  closers.add(close);
}

export async function closeDb(): Promise<void> {
  const pools = [client, lockClient];
  client = lockClient = undefined;
  const pending = [...closers];
  closers.clear();
  await Promise.all([
    ...pools.map((c) => c?.end({ timeout: 5 })),
    ...pending.map((close) => close()),
  ]);
}

/**
 * With DATABASE_URL set, uses it. Without it, starts (or reuses) the embedded PostgreSQL under
 * DATA_DIR/postgres, makes sure the `app` database exists, and exports its URL to this process
 * and its children.
 */
export async function resolveDatabaseUrl(): Promise<{
  url: string;
  /** Present when the embedded server is in use; `started` tells whether this call started it. */
  embedded?: Pick<Cluster, "started" | "stop" | "running" | "restart">;
}> {
  const configured = env().DATABASE_URL;
  if (configured) return { url: configured };
  const cluster = await startCluster({ dir: path.join(env().DATA_DIR, "postgres") });
  logger().info(
    { port: cluster.port, dir: cluster.dir, reused: !cluster.started },
    "embedded PostgreSQL %s",
    cluster.started ? "started" : "already running",
  );
  const admin = postgres(cluster.url, { max: 1, onnotice: () => {} });
  try {
    const [row] = await admin`select 1 as ok from pg_database where datname = 'app'`;
    if (!row) await admin.unsafe("create database app");
  } finally {
    await admin.end();
  }
  const url = withDatabase(cluster.url, "app");
  process.env.DATABASE_URL = url;
  resetEnvCache();
  return { url, embedded: cluster };
}
