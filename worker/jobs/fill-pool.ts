import { db } from "../../app/server/platform/db.server.ts";
import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { fillPool } from "../instances/pool-fill.ts";

/** Keeps RUNTIME_POOL_SIZE warm gateways; one filler at a time across workers. */
export async function fillPoolJob(_payload: JobPayload<"fill-pool">) {
  const conn = await db().reserve();
  try {
    const [got] = await conn<{ ok: boolean }[]>`select pg_try_advisory_lock(727100002) as ok`;
    if (!got?.ok) return { skipped: "another worker is filling the pool" };
    try {
      return await fillPool();
    } finally {
      await conn`select pg_advisory_unlock(727100002)`;
    }
  } finally {
    conn.release();
  }
}
