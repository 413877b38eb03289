import {
  type InstanceRow,
  listInstances,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { rt } from "./engine.ts";

/** Records the size of every instance's state volume (the files dashboard's "used"). */
export async function measureStorage(rows?: InstanceRow[]): Promise<number> {
  const sizes = await rt().volumeSizes();
  let n = 0;
  for (const row of rows ?? (await listInstances())) {
    const bytes = sizes.get(row.volume_name);
    if (bytes === undefined) continue;
    await updateInstance(row.id, { storage_bytes: bytes, storage_measured_at: new Date() });
    n++;
  }
  return n;
}

/**
 * measureStorage when a size is missing or older than STORAGE_MEASURE_INTERVAL_MS: Docker's
 * /system/df walks every volume, so not on every reconcile pass. Returns how many were measured.
 */
export async function measureStorageWhenDue(rows: InstanceRow[]): Promise<number> {
  const stale = Date.now() - env().STORAGE_MEASURE_INTERVAL_MS;
  const due = rows.some((r) => !r.storage_measured_at || r.storage_measured_at.getTime() <= stale);
  return due ? measureStorage(rows) : 0;
}
