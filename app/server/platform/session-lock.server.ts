import { setTimeout as delay } from "node:timers/promises";
import type postgres from "postgres";
import { lockDb } from "./db.server.ts";

// Session advisory locks on a reserved connection, safe when that connection dies under them.
//
// postgres.js (3.4.9) crashes the process when a reserved connection whose socket has closed
// is used again or released: the next write runs on a null socket from a setImmediate, an
// uncaught TypeError (porsager/postgres#1208, open). A PostgreSQL restart during a locked
// operation (a provision holds its instance's lock for minutes) did exactly that to the worker
// in the soak (decision 0218). The lock dies with its session anyway, so once the connection
// has closed, neither the unlock nor the release is sent: the pool reconnects the closed
// connection itself. The close is observed the way postgres.js's own `begin` observes it: the
// connection's `onclose` hook, reached through the query's `onexecute` option.

/** What the lock's holder can see: whether the session (and so the lock) is gone. */
export interface SessionLock {
  readonly lost: boolean;
}

/** The connection postgres.js hands to `onexecute` (internal: only its close hook is used). */
interface ConnectionHook {
  onclose: ((error: unknown) => void) | null;
}

/**
 * A lock's key as its callers have always computed it (a change would let an old and a new
 * process take the same lock at once during a rolling update).
 */
export type LockKey = { hashtext: string } | { hashtextextended: string } | { id: number };

const keySql = (key: LockKey): [string, Array<string | number>] =>
  "hashtext" in key
    ? ["hashtext($1)", [key.hashtext]]
    : "hashtextextended" in key
      ? ["hashtextextended($1, 0)", [key.hashtextextended]]
      : ["$1::bigint", [key.id]];

/** Waits between tries for a lock another session holds (doubling up to the last). */
const RETRY_MS = [25, 50, 100, 200, 400, 500];

/**
 * Runs `fn` holding the session advisory lock `key`, waiting for it; with `wait: false`,
 * returns undefined at once when another session holds it.
 *
 * The lock is held on a connection of lockDb(), not of the query pool that `fn` uses, and a
 * waiter holds no connection while it waits (it tries again, backing off): holders and waiters
 * that took every connection of one pool waited on each other for good (decision 0237).
 */
export function withSessionLock<T>(key: LockKey, fn: (lock: SessionLock) => Promise<T>): Promise<T>;
export function withSessionLock<T>(
  key: LockKey,
  fn: (lock: SessionLock) => Promise<T>,
  options: { wait: false },
): Promise<T | undefined>;
export async function withSessionLock<T>(
  key: LockKey,
  fn: (lock: SessionLock) => Promise<T>,
  options: { wait: boolean } = { wait: true },
): Promise<T | undefined> {
  const [expr, params] = keySql(key);
  for (let attempt = 0; ; attempt++) {
    const held = await tryOnce(expr, params, fn);
    if (held.taken) return held.value;
    if (!options.wait) return undefined;
    waiters++;
    try {
      await delay(RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)] as number);
    } finally {
      waiters--;
    }
  }
}

let waiters = 0;

/** Callers of this process between two tries of a lock another session holds (tests). */
export const waitingForLocks = (): number => waiters;

/** One try: the lock taken on a reserved connection and `fn` run, or the lock busy. */
async function tryOnce<T>(
  expr: string,
  params: Array<string | number>,
  fn: (lock: SessionLock) => Promise<T>,
): Promise<{ taken: true; value: T } | { taken: false }> {
  const conn = await lockDb().reserve();
  const state = { lost: false };
  let hooked: ConnectionHook | undefined;
  const watch = {
    onexecute(connection: ConnectionHook) {
      hooked = connection;
      connection.onclose = () => {
        state.lost = true;
      };
      return true;
    },
  } as postgres.UnsafeQueryOptions; // onexecute is postgres.js's own hook, not in its types
  try {
    // postgres.js calls onexecute only for a statement without parameters (one with them is
    // described first): this one hooks the close before the lock is taken.
    await conn.unsafe("select 1", [], watch);
    const rows = await conn.unsafe<{ ok: boolean }[]>(
      `select pg_try_advisory_lock(${expr}) as ok`,
      params,
    );
    if (!rows[0]?.ok) return { taken: false };
    try {
      return { taken: true, value: await fn(state) };
    } finally {
      if (!state.lost) {
        await conn.unsafe(`select pg_advisory_unlock(${expr})`, params).catch(() => {});
      }
    }
  } finally {
    if (hooked?.onclose) hooked.onclose = null;
    if (!state.lost) conn.release();
  }
}
