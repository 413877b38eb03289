import { db } from "../../app/server/platform/db.server.ts";

// One operation per instance at a time: a session advisory lock keyed by the instance id.

const key = (instanceId: string) => `instance:${instanceId}`;

/** Runs `fn` holding the session advisory lock `name`, waiting for it. */
async function withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const conn = await db().reserve();
  try {
    await conn`select pg_advisory_lock(hashtext(${name}))`;
    try {
      return await fn();
    } finally {
      await conn`select pg_advisory_unlock(hashtext(${name}))`;
    }
  } finally {
    conn.release();
  }
}

/** Runs `fn` holding the instance's lock, waiting for it. */
export function withInstanceLock<T>(instanceId: string, fn: () => Promise<T>): Promise<T> {
  return withLock(key(instanceId), fn);
}

/**
 * Runs `fn` holding one backup's lock: a second delivery of its job (an expired one handed out
 * again) waits for the first's upload instead of copying over its temp file.
 */
export function withBackupLock<T>(backupId: string, fn: () => Promise<T>): Promise<T> {
  return withLock(`backup:${backupId}`, fn);
}

/** Like withInstanceLock, but skips (returns undefined) when another operation holds it. */
export async function tryInstanceLock<T>(
  instanceId: string,
  fn: () => Promise<T>,
): Promise<T | undefined> {
  const conn = await db().reserve();
  try {
    const [got] = await conn<{ ok: boolean }[]>`
      select pg_try_advisory_lock(hashtext(${key(instanceId)})) as ok`;
    if (!got?.ok) return undefined;
    try {
      return await fn();
    } finally {
      await conn`select pg_advisory_unlock(hashtext(${key(instanceId)}))`;
    }
  } finally {
    conn.release();
  }
}
