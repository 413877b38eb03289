import { type StorageView, storageOfUser } from "../agents/storage.server.ts";
import {
  GIB,
  type StorageEntitlement,
  setStorageOverride,
  storageEntitlement,
} from "../billing/storage-limit.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { sendJob } from "../platform/jobs.server.ts";

// /ops: a user's storage (usage, the limit owed and where it comes from) and an operator's
// per-user limit, applied live by the worker's storage pass (decisions 0216, 0217).

export interface OpsStorage {
  usage: StorageView;
  entitlement: StorageEntitlement;
}

export async function opsStorageOfUser(userId: string): Promise<OpsStorage> {
  const [usage, entitlement] = await Promise.all([
    storageOfUser(userId),
    storageEntitlement(userId),
  ]);
  return { usage, entitlement };
}

/** Sets (GB) or clears (null) the user's limit; the worker applies it at once. */
export async function setStorageLimitAsOperator(
  operatorId: string,
  userId: string,
  gigabytes: number | null,
): Promise<void> {
  const before = await storageEntitlement(userId);
  const bytes = gigabytes === null ? null : Math.round(gigabytes * GIB);
  await setStorageOverride(userId, bytes);
  await recordAudit({
    action: "storage.limit_changed",
    userId,
    target: userId,
    details: { from: before.limitBytes, override: bytes, by: operatorId },
  });
  await sendJob("sample-storage", { userId });
}
