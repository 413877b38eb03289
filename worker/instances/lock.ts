import { db } from "../../app/server/platform/db.server.ts";

// One operation per instance at a time: a session advisory lock keyed by the instance id.

const key = (instanceId: string) => `instance:${instanceId}`;

/** Runs `fn` holding the instance's lock, waiting for it. */
export async function withInstanceLock<T>(instanceId: string, fn: () => Promise<T>): Promise<T> {
  const conn = await db().reserve();
  try {
    await conn`select pg_advisory_lock(hashtext(${key(instanceId)}))`;
    try {
      return await fn();
    } finally {
      await conn`select pg_advisory_unlock(hashtext(${key(instanceId)}))`;
    }
  } finally {
    conn.release();
  }
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
