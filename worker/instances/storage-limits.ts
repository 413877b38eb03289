import {
  getInstanceByUser,
  type InstanceRow,
  listInstances,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { storageEntitlement } from "../../app/server/billing/storage-limit.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { logger } from "../../app/server/platform/logger.server.ts";
import type { AgentRuntime } from "../runtime/types.ts";
import { rt } from "./engine.ts";
import { sendStorageNotice } from "./storage-notices.ts";

// The storage pass (decisions 0216, 0217): per limited volume, the kernel's usage is recorded,
// the limit the user is owed is applied live (raised at once; lowered at once when the data
// fits, else after a grace period, never by deleting anything) and a warning goes out once per
// crossing of 80 % and 95 %.

export const WARN_LEVELS = [95, 80] as const;

/** The warning level usage is at: 95, 80 or 0. */
export function warningLevel(usedBytes: number, limitBytes: number): 0 | 80 | 95 {
  const percent = (usedBytes / limitBytes) * 100;
  return WARN_LEVELS.find((level) => percent >= level) ?? 0;
}

export interface LimitDecision {
  /** The limit to set now (undefined: leave the applied one). */
  apply: number | undefined;
  graceUntil: Date | null;
  /** A grace period began with this decision (the user is told). */
  graceStarted: boolean;
}

/** What to do with a volume's limit given what is applied, owed and used. */
export function decideLimit(input: {
  applied: number | undefined;
  wanted: number;
  usedBytes: number;
  graceUntil: Date | null;
  now: Date;
  graceMs: number;
}): LimitDecision {
  const { applied, wanted, usedBytes, graceUntil, now, graceMs } = input;
  const keep = { apply: undefined, graceUntil: null, graceStarted: false };
  if (applied === wanted) return keep;
  // Raising, a first limit, or a lowering the data fits under: at once.
  if (applied === undefined || wanted > applied || usedBytes <= wanted) {
    return { ...keep, apply: wanted };
  }
  if (!graceUntil) {
    return { apply: undefined, graceUntil: new Date(now.getTime() + graceMs), graceStarted: true };
  }
  if (now >= graceUntil) return { ...keep, apply: wanted }; // writes refused past it; data kept
  return { apply: undefined, graceUntil, graceStarted: false };
}

/** One instance's limit applied at creation: its volume starts at the user's limit. */
export async function storageLimitFor(row: InstanceRow): Promise<number> {
  return (await storageEntitlement(row.user_id)).limitBytes;
}

/** Rescans the storage roots whose counts went inconsistent (no limit holds then, 0243). */
export async function restoreStorageCounts(runtime: AgentRuntime): Promise<void> {
  for (const where of (await runtime.restoreStorageCounts?.()) ?? []) {
    logger().warn({ where }, "storage: counts were inconsistent (no limit held); rescanned");
  }
}

/** Runs the pass over every instance (or one user's); returns how many volumes it looked at. */
export async function sampleStorage(userId?: string): Promise<number> {
  const runtime = rt();
  if (!runtime.storageUsage || !runtime.setStorageLimit) return 0;
  // A check that fails is logged; the pass still records usage and applies limits.
  await restoreStorageCounts(runtime).catch((error: unknown) =>
    logger().warn({ err: error }, "storage: the counts' check failed"),
  );
  const usage = await runtime.storageUsage();
  const rows = userId
    ? [await getInstanceByUser(userId)].filter((r) => r !== undefined)
    : await listInstances();
  let n = 0;
  for (const row of rows) {
    const volume = usage.get(row.volume_name);
    if (!volume) continue; // not a limited volume (made before the storage root, or gone)
    try {
      await sampleOne(row, volume);
      n++;
    } catch (error) {
      logger().warn({ err: error, instanceId: row.id }, "storage: sampling failed");
    }
  }
  return n;
}

async function sampleOne(
  row: InstanceRow,
  volume: { usedBytes: number; limitBytes: number | undefined },
): Promise<void> {
  const now = new Date();
  const { limitBytes: wanted } = await storageEntitlement(row.user_id);
  const decision = decideLimit({
    applied: volume.limitBytes,
    wanted,
    usedBytes: volume.usedBytes,
    graceUntil: row.storage_grace_until,
    now,
    graceMs: env().STORAGE_GRACE_DAYS * 86_400_000,
  });
  if (decision.apply !== undefined) {
    await rt().setStorageLimit?.(row.volume_name, decision.apply);
    logger().info(
      { instanceId: row.id, from: volume.limitBytes, to: decision.apply },
      "storage: limit applied",
    );
  }
  const limit = decision.apply ?? volume.limitBytes ?? wanted;
  const level = warningLevel(volume.usedBytes, limit);
  // Recorded before the mails are queued: a failed write sends nothing twice.
  await updateInstance(row.id, {
    storage_bytes: volume.usedBytes,
    storage_measured_at: now,
    storage_limit_bytes: limit,
    storage_warned_percent: level,
    storage_grace_until: decision.graceUntil,
  });
  if (decision.graceStarted && decision.graceUntil) {
    await sendStorageNotice(row.user_id, {
      kind: "grace",
      usedBytes: volume.usedBytes,
      limitBytes: wanted,
      until: decision.graceUntil,
    });
  }
  // Once per crossing: a level above the last warned one sends; falling below lowers the mark,
  // so the next crossing sends again.
  if (level !== 0 && level > row.storage_warned_percent) {
    await sendStorageNotice(row.user_id, {
      kind: "warning",
      level,
      usedBytes: volume.usedBytes,
      limitBytes: limit,
    });
  }
}
