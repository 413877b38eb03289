import {
  credentialChanges,
  credentialStillValid,
  type LiveCredential,
  watchCredential,
} from "../accounts/credential-watch.server.ts";
import { organisationActing } from "../organisations/acting.server.ts";
import { allows, type Permission } from "../organisations/roles.server.ts";
import { db } from "../platform/db.server.ts";
import { logger } from "../platform/logger.server.ts";

// Whether a connection that outlives its request (the live agent socket, an event stream) may
// go on: asked when it opens a turn and whenever its credential may have changed
// (credential-watch). docs/decisions/0198-live-sockets-recheck-their-credential.md

/** What the connection reaches: the agents of `ownerId`, or one of them. */
export interface LiveTarget {
  ownerId: string;
  agentId?: string;
  /** What the connection does, for a member of an organisation owner (default: chat). */
  permission?: Permission;
}

/** The close reason (WebSocket) and `error` (event stream) of a revoked connection. */
export const REVOKED = "credential revoked";

/**
 * May this credential still use this agent? The one place that answers it for open
 * connections: the person's own agents, or an organisation's whose member they still are with
 * a role that may chat (a removed member's sockets close like a signed-out user's).
 */
export function mayStillUse(credential: LiveCredential, target: LiveTarget): Promise<boolean> {
  // The backstop asks every open connection at once: the connections of one credential and
  // target (a person's 50 sockets) share one check instead of a query each (decision 0220).
  // Only a check begun since the last change the listener heard is shared, so a connection asked
  // because of a revocation never gets the answer of a check that began before it.
  const key = [
    credentialChanges(),
    credential.userId,
    credential.sessionId ?? "",
    credential.keyId ?? "",
    target.ownerId,
    target.agentId ?? "",
    target.permission ?? "",
  ].join("\n");
  const running = checks.get(key);
  if (running) return running;
  const check = checkAccess(credential, target).finally(() => checks.delete(key));
  checks.set(key, check);
  return check;
}

/** Checks under way, by what they ask (see mayStillUse). */
const checks = new Map<string, Promise<boolean>>();

async function checkAccess(credential: LiveCredential, target: LiveTarget): Promise<boolean> {
  if (credential.userId !== target.ownerId) {
    const acting = await organisationActing(target.ownerId, credential.userId);
    const permission = target.permission ?? "agents.chat";
    if (!acting || !allows(acting.role, permission) || acting.organisation.suspendedAt) {
      return false;
    }
  }
  if (!(await credentialStillValid(credential))) return false;
  if (target.agentId === undefined) return true;
  const [row] = await db()`
    select 1 from agents where id = ${target.agentId} and user_id = ${target.ownerId}`;
  return row !== undefined;
}

/**
 * Rechecks `mayStillUse` whenever the credential may have changed and calls `onRevoked` once
 * when it no longer may; the returned function stops it (call it when the connection ends).
 * A check that fails (the database unreachable) leaves the connection open until the next one.
 */
export function guardLive(
  credential: LiveCredential,
  target: LiveTarget,
  onRevoked: () => void,
): () => void {
  let stopped = false;
  let checking = false;
  let again = false;
  const check = (): void => {
    if (stopped) return;
    // One check at a time; a change during one is checked once more after it.
    if (checking) {
      again = true;
      return;
    }
    checking = true;
    again = false;
    mayStillUse(credential, target)
      .then(
        (ok) => {
          if (ok || stopped) return;
          stop();
          onRevoked();
        },
        (error: unknown) => logger().warn({ err: error }, "live connection recheck failed"),
      )
      .finally(() => {
        checking = false;
        if (again) check();
      });
  };
  const unwatch = watchCredential(credential, check);
  // A revocation between the connection's admission and this watch would otherwise go unseen
  // until the backstop.
  check();
  function stop() {
    stopped = true;
    unwatch();
  }
  return stop;
}
