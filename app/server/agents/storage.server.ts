import { db } from "../platform/db.server.ts";
import { runtimeDeployment } from "./engine-health.server.ts";
import type { InstanceRow } from "./instances.server.ts";

// Storage as users and operators see it (decisions 0216, 0217): the kernel-measured usage and
// the applied limit the worker's storage pass records on the instance, and whether this
// deployment's worker can enforce limits at all (recorded at its start).

export interface StorageView {
  usedBytes: number;
  /** The hard limit on the volume; null where it is not enforced. */
  limitBytes: number | null;
  /** Whole percent of the limit used; null without a limit. */
  percent: number | null;
  /** 80 or 95 when usage is past that warning level, else null. */
  warning: 80 | 95 | null;
  /** The limit is reached: the gateway answers but cannot save anything new. */
  full: boolean;
  enforced: boolean;
  measuredAt: string | null;
  /** A lower limit waits until then (the data is above it). */
  graceUntil: string | null;
}

/** Full from 99 %: btrfs refuses writes a little before the last byte (metadata reserve). */
const FULL_PERCENT = 99;

type StorageFields = Pick<
  InstanceRow,
  "storage_bytes" | "storage_measured_at" | "storage_limit_bytes" | "storage_grace_until"
>;

export function storageView(row: StorageFields | undefined): StorageView {
  const used = Number(row?.storage_bytes ?? 0);
  const limit = row?.storage_limit_bytes == null ? null : Number(row.storage_limit_bytes);
  const exact = limit ? (used / limit) * 100 : null;
  return {
    usedBytes: used,
    limitBytes: limit,
    percent: exact === null ? null : Math.min(100, Math.floor(exact)),
    warning: exact === null ? null : exact >= 95 ? 95 : exact >= 80 ? 80 : null,
    full: exact !== null && exact >= FULL_PERCENT,
    enforced: limit !== null,
    measuredAt: row?.storage_measured_at?.toISOString() ?? null,
    graceUntil: row?.storage_grace_until?.toISOString() ?? null,
  };
}

/** The storage figures of a user's instance, read apart from any kept (versioned) view. */
export async function storageOfUser(userId: string): Promise<StorageView> {
  const [row] = await db()<StorageFields[]>`
    select storage_bytes, storage_measured_at, storage_limit_bytes, storage_grace_until
    from instances where user_id = ${userId}`;
  return storageView(row);
}

export interface StorageEnforcementRecord {
  enforced: boolean;
  detail: string;
  checkedAt: Date;
}

export async function recordStorageEnforcement(enforced: boolean, detail: string): Promise<void> {
  await db()`
    insert into runtime_storage (deployment, enforced, detail, checked_at)
    values (${runtimeDeployment()}, ${enforced}, ${detail}, now())
    on conflict (deployment) do update set enforced = excluded.enforced,
      detail = excluded.detail, checked_at = excluded.checked_at`;
}

/** What the deployment's worker said at its start; undefined before any worker started. */
export async function storageEnforcement(): Promise<StorageEnforcementRecord | undefined> {
  const [row] = await db()<{ enforced: boolean; detail: string; checked_at: Date }[]>`
    select enforced, detail, checked_at from runtime_storage
    where deployment = ${runtimeDeployment()}`;
  return row && { enforced: row.enforced, detail: row.detail, checkedAt: row.checked_at };
}
