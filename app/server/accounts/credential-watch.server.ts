import { db, onDbClose } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { logger } from "../platform/logger.server.ts";
import { type ChannelListener, listenChannel } from "../platform/pg-channel.server.ts";
import type { Auth } from "./auth.server.ts";
import { CREDENTIALS_CHANNEL } from "./credential-cache.server.ts";

// Long-lived connections (the live agent socket, event streams) are authorised at their start;
// this tells them when to ask again. Every change to a user, key or session row NOTIFYs
// `credentials` (migration 0050), so a watcher whose credential a message names is asked at
// once; when the listener may have missed messages every watcher is asked; and every
// LIVE_RECHECK_MS all of them are asked anyway (the backstop for a listener that cannot connect).
// docs/decisions/0198-live-sockets-recheck-their-credential.md

/**
 * The credential a connection was opened with, as much as is needed to check it again: its
 * person (`userId`), whichever owner the connection acts for (decision 0203).
 */
export interface LiveCredential {
  userId: string;
  via: Auth["via"];
  sessionId?: string;
  keyId?: string;
}

export function liveCredentialOf(auth: Auth): LiveCredential {
  return {
    userId: auth.person.id,
    via: auth.via,
    ...(auth.sessionId ? { sessionId: auth.sessionId } : {}),
    ...(auth.keyId ? { keyId: auth.keyId } : {}),
  };
}

/**
 * True while the credential would still sign a request in: its session not revoked or expired
 * (a session JWT lives and dies with its session), its API key not deleted, its user not
 * suspended or deleted.
 */
export async function credentialStillValid(credential: LiveCredential): Promise<boolean> {
  const sql = db();
  if (credential.sessionId) {
    const [row] = await sql`
      select 1 from sessions s join users u on u.id = s.user_id
      where s.id = ${credential.sessionId} and s.user_id = ${credential.userId}
        and s.revoked_at is null and s.expires_at > now() and u.suspended_at is null`;
    return row !== undefined;
  }
  if (credential.keyId) {
    const [row] = await sql`
      select 1 from api_keys k join users u on u.id = k.user_id
      where k.id = ${credential.keyId} and k.user_id = ${credential.userId}
        and u.suspended_at is null`;
    return row !== undefined;
  }
  return false; // a credential with neither cannot be checked: treat it as gone
}

type Recheck = () => void;
/** Watchers by the channel's names: `u:<user>`, `s:<session>`, `k:<key>`. */
const byName = new Map<string, Set<Recheck>>();
const all = new Set<Recheck>();
let listener: ChannelListener | undefined;
let sweep: NodeJS.Timeout | undefined;

/**
 * Bumped by every message the listener hears (and every reset): a check that began before a
 * change was heard must not answer for a connection asked because of it (live-access).
 */
let changes = 0;
export const credentialChanges = () => changes;

const askAll = () => {
  for (const recheck of all) recheck();
};

function namesOf(credential: LiveCredential): string[] {
  return [
    `u:${credential.userId}`,
    ...(credential.sessionId ? [`s:${credential.sessionId}`] : []),
    ...(credential.keyId ? [`k:${credential.keyId}`] : []),
  ];
}

/** The replica's one listener and backstop timer, started with its first watcher. */
function ensureStarted(): void {
  if (!sweep) {
    sweep = setInterval(askAll, env().LIVE_RECHECK_MS);
    sweep.unref();
  }
  if (listener) return;
  const url = env().DATABASE_URL;
  if (!url) return;
  db(); // the pool first: closing it stops the listener too
  const made = listenChannel(url, CREDENTIALS_CHANNEL, {
    onMessage: (name) => {
      changes += 1;
      const named = byName.get(name);
      // A membership changed (`m:<organisation>:<person>`): its person's connections are
      // asked. Unknown message kinds: ask everyone rather than miss a revocation.
      const member = /^m:[^:]+:(.+)$/.exec(name);
      if (member) for (const recheck of byName.get(`u:${member[1]}`) ?? []) recheck();
      else if (!/^[uks]:/.test(name)) askAll();
      else for (const recheck of named ?? []) recheck();
    },
    onReset: () => {
      changes += 1;
      askAll();
    },
  });
  listener = made.listener;
  made.ready.catch((error: unknown) =>
    logger().warn({ err: error }, "credential watch listener cannot connect yet"),
  );
  onDbClose(async () => {
    const stopping = listener;
    listener = undefined;
    clearInterval(sweep);
    sweep = undefined;
    await stopping?.stop();
  });
}

/**
 * Calls `recheck` whenever the credential may have changed: a NOTIFY naming its user, session
 * or key, a listener reset, and every LIVE_RECHECK_MS. Returns the function that stops it.
 */
export function watchCredential(credential: LiveCredential, recheck: Recheck): () => void {
  ensureStarted();
  const names = namesOf(credential);
  for (const name of names) {
    const set = byName.get(name) ?? new Set<Recheck>();
    byName.set(name, set);
    set.add(recheck);
  }
  all.add(recheck);
  return () => {
    all.delete(recheck);
    for (const name of names) {
      const set = byName.get(name);
      set?.delete(recheck);
      if (set?.size === 0) byName.delete(name);
    }
    if (all.size === 0) {
      clearInterval(sweep);
      sweep = undefined;
    }
  };
}

/** Watchers on this replica (tests). */
export const credentialWatchers = () => all.size;
