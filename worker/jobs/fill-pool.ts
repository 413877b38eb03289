import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { withSessionLock } from "../../app/server/platform/session-lock.server.ts";
import { fillPool } from "../instances/pool-fill.ts";

/** Keeps RUNTIME_POOL_SIZE warm gateways; one filler at a time across workers. */
export async function fillPoolJob(_payload: JobPayload<"fill-pool">) {
  const filled = await withSessionLock({ id: 727100002 }, () => fillPool(), { wait: false });
  return filled ?? { skipped: "another worker is filling the pool" };
}
