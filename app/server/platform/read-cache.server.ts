import { batchedRead } from "./batched-read.server.ts";
import { db } from "./db.server.ts";

// Reads that many requests repeat (an agents list, an agent's detail, a balance), kept in memory
// per owner and checked against the owner's version before each use: triggers add to
// `read_versions` in the same transaction as any change to the rows behind them (migration
// 0098), so one indexed read tells whether the kept rows are still what the database holds. A
// check reads the version before the rows are read, so a change that commits in between makes
// the next check miss; nothing a committed change made stale is ever answered. Correct across
// replicas with no listener: each checks the database. docs/decisions/0176-read-versions.md

const MAX_ENTRIES = 10_000;

interface Kept {
  version: number;
  value: unknown;
  /** ms since epoch after which the value is read afresh even at the same version. */
  until: number;
}

const kept = new Map<string, Kept>();

/** The TRUNCATE row's owner: every check adds it. */
const EVERYONE = "*";

// Checks made at once share one statement (batched-read.server.ts: read-your-writes holds).
const versionsOf = batchedRead(async (owners: string[]) => {
  const rows = await db()<{ owner_id: string; v: number }[]>`
    select owner_id, sum(weight)::bigint as v from read_versions
    where owner_id = any(${[...owners, EVERYONE]}::text[]) group by owner_id`;
  const sums = new Map(rows.map((r) => [r.owner_id, r.v]));
  const everyone = sums.get(EVERYONE) ?? 0;
  return new Map(owners.map((o) => [o, (sums.get(o) ?? 0) + everyone]));
});

/** The owner's version: the sum of their rows' weights (and a TRUNCATE's, under '*'). */
async function versionOf(ownerId: string): Promise<number> {
  return (await versionsOf(ownerId)) ?? 0;
}

/**
 * What `read` gives for this owner and key: kept from an earlier call while the owner's version
 * has not moved, else read afresh and kept. `read` must read only rows whose changes move the
 * owner's version (migration 0098's triggers); the kept value is shared between requests, and
 * frozen.
 */
export async function versionedRead<T>(
  ownerId: string,
  key: string,
  read: () => Promise<T>,
  /**
   * For a value that also moves with time (counts over the last hour): when it stops being
   * what a read would give at the same version, in ms since epoch.
   */
  until: (value: T) => number = () => Number.POSITIVE_INFINITY,
): Promise<T> {
  const version = await versionOf(ownerId);
  const id = `${ownerId}\u0000${key}`;
  const hit = kept.get(id);
  if (hit && hit.version === version && Date.now() < hit.until) return hit.value as T;
  const value = await read();
  deepFreeze(value); // shared from now on: a caller that changes it fails loudly
  kept.delete(id); // re-inserted last: the oldest entry is the first the bound evicts
  if (kept.size >= MAX_ENTRIES) kept.delete(kept.keys().next().value as string);
  kept.set(id, { version, value, until: until(value) });
  return value;
}

function deepFreeze(value: unknown): void {
  if (typeof value !== "object" || value === null || Object.isFrozen(value)) return;
  if (ArrayBuffer.isView(value)) return; // byte arrays cannot be frozen
  Object.freeze(value);
  for (const inner of Object.values(value)) deepFreeze(inner);
}
