import {
  type SessionLock,
  withSessionLock,
} from "../../app/server/platform/session-lock.server.ts";

// One operation per instance at a time: a session advisory lock keyed by the instance id (on a
// reserved connection that may die under it: session-lock.server.ts).

const key = (instanceId: string) => ({ hashtext: `instance:${instanceId}` });

/** Runs `fn` holding the instance's lock, waiting for it. */
export function withInstanceLock<T>(
  instanceId: string,
  fn: (lock: SessionLock) => Promise<T>,
): Promise<T> {
  return withSessionLock(key(instanceId), fn);
}

/**
 * Runs `fn` holding one backup's lock: a second delivery of its job (an expired one handed out
 * again) waits for the first's upload instead of copying over its temp file.
 */
export function withBackupLock<T>(backupId: string, fn: () => Promise<T>): Promise<T> {
  return withSessionLock({ hashtext: `backup:${backupId}` }, fn);
}

/** Like withInstanceLock, but skips (returns undefined) when another operation holds it. */
export function tryInstanceLock<T>(
  instanceId: string,
  fn: () => Promise<T>,
): Promise<T | undefined> {
  return withSessionLock(key(instanceId), fn, { wait: false });
}
