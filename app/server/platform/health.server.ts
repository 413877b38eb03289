import { db } from "./db.server.ts";
import { jobNames } from "./jobs.server.ts";
import { platformVersion } from "./version.server.ts";

export interface Health {
  status: "ok" | "error";
  database: "ok" | "unreachable";
  queue: "ok" | "missing" | "unknown";
  version: string;
}

const TIMEOUT_MS = 2000;

function withTimeout<T>(promise: Promise<T>): Promise<T> {
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      setTimeout(() => reject(new Error("timed out")), TIMEOUT_MS).unref();
    }),
  ]);
}

let inFlight: Promise<Health> | undefined;

/**
 * The health of the database and the queue store. Concurrent callers share the check in flight
 * (under a load balancer's and a monitor's probes, one query per round trip instead of one per
 * request); every answer comes from a check that was still running when it was asked.
 */
export function checkHealth(): Promise<Health> {
  if (!inFlight) {
    inFlight = check().finally(() => {
      inFlight = undefined;
    });
  }
  return inFlight;
}

/** One query on the happy path; on failure a second tells the database from the queue store. */
async function check(): Promise<Health> {
  const sql = db();
  try {
    const [row] = await withTimeout(
      sql<
        { n: number }[]
      >`select count(*)::int as n from pgboss.queue where name = any(${jobNames})`,
    );
    const queue = row?.n === jobNames.length ? "ok" : "missing";
    return {
      status: queue === "ok" ? "ok" : "error",
      database: "ok",
      queue,
      version: platformVersion,
    };
  } catch {
    const databaseUp = await withTimeout(sql`select 1`).then(
      () => true,
      () => false,
    );
    return {
      status: "error",
      database: databaseUp ? "ok" : "unreachable",
      queue: databaseUp ? "missing" : "unknown",
      version: platformVersion,
    };
  }
}
