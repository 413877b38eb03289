import { db, onDbClose } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { type ChannelListener, listenChannel } from "../platform/pg-channel.server.ts";
import type { User } from "./model.server.ts";

// Who an API key or a session cookie belongs to, kept in memory so that an authenticated read
// costs no database round trip for its credential. Correct across replicas: every change to a
// user, key or session row NOTIFYs `credentials` (migration 0050's triggers), each replica's
// listener drops what it names, and the cache is trusted only while that listener provably
// hears (heartbeat echo); anything that may have missed a message drops everything. The
// process that makes a change also forgets it synchronously (`forgetKey`, `forgetSession`,
// `forgetUser`), so it refuses at once without waiting for its own echo. The operator's
// suspension (an update of `users`) is covered by the trigger; code that wants it at once in
// its own process calls `forgetUser`. docs/decisions/0120-credential-cache.md

export const CREDENTIALS_CHANNEL = "credentials";
const MAX_ENTRIES = 20_000;

export interface KeyEntry {
  keyId: string;
  user: User;
  /** ms since epoch; null: never used. */
  lastUsedAt: number | null;
}

export interface SessionEntry {
  sessionId: string;
  user: User;
  lastSeenAt: number;
  expiresAt: number;
}

interface Stored<T> {
  value: T;
  generation: number;
}

export class CredentialCache {
  readonly #keys = new Map<string, Stored<KeyEntry>>();
  readonly #sessions = new Map<string, Stored<SessionEntry>>();
  readonly #listener: ChannelListener;
  /** Moves on every invalidation: a lookup that began before one does not store its result. */
  #epoch = 0;

  constructor(listener: ChannelListener) {
    this.#listener = listener;
  }

  /** Marks the start of a database lookup; pass it to `putKey`/`putSession`. */
  epoch(): number {
    return this.#epoch;
  }

  key(hash: string): KeyEntry | undefined {
    return this.#get(this.#keys, hash);
  }

  session(hash: string): SessionEntry | undefined {
    return this.#get(this.#sessions, hash);
  }

  putKey(hash: string, value: KeyEntry, epoch: number): void {
    this.#put(this.#keys, hash, value, epoch);
  }

  putSession(hash: string, value: SessionEntry, epoch: number): void {
    this.#put(this.#sessions, hash, value, epoch);
  }

  forgetKey(keyId: string): void {
    this.#forget(this.#keys, (e) => e.keyId === keyId);
  }

  forgetSession(sessionId: string): void {
    this.#forget(this.#sessions, (e) => e.sessionId === sessionId);
  }

  /** Every key and session of the user (a changed, suspended or deleted user). */
  forgetUser(userId: string): void {
    this.#forget(this.#keys, (e) => e.user.id === userId);
    this.#forget(this.#sessions, (e) => e.user.id === userId);
  }

  /** A message of the channel: `u:<user id>`, `k:<key id>` or `s:<session id>`. */
  onMessage(payload: string): void {
    const id = payload.slice(2);
    if (payload.startsWith("u:")) this.forgetUser(id);
    else if (payload.startsWith("k:")) this.forgetKey(id);
    else if (payload.startsWith("s:")) this.forgetSession(id);
    else this.clear(); // unknown: be safe
  }

  clear(): void {
    this.#epoch++;
    this.#keys.clear();
    this.#sessions.clear();
  }

  get size(): number {
    return this.#keys.size + this.#sessions.size;
  }

  #get<T>(map: Map<string, Stored<T>>, hash: string): T | undefined {
    const stored = map.get(hash);
    if (!stored) return undefined;
    if (stored.generation !== this.#listener.generation || !this.#listener.live()) {
      map.delete(hash);
      return undefined;
    }
    return stored.value;
  }

  #put<T>(map: Map<string, Stored<T>>, hash: string, value: T, epoch: number): void {
    // Something was invalidated while this lookup ran (its row may be the old one), or the
    // listener cannot vouch for what it would miss: do not keep it.
    if (epoch !== this.#epoch || !this.#listener.live()) return;
    if (map.size >= MAX_ENTRIES) map.delete(map.keys().next().value as string);
    map.set(hash, { value, generation: this.#listener.generation });
  }

  #forget<T>(map: Map<string, Stored<T>>, match: (entry: T) => boolean): void {
    this.#epoch++;
    for (const [hash, stored] of map) if (match(stored.value)) map.delete(hash);
  }
}

/** A cache with its own listener on `url` (one per replica; tests make a second). */
export function createCredentialCache(
  url: string,
  options: { heartbeatMs?: number; staleAfterMs?: number } = {},
) {
  let cache: CredentialCache | undefined;
  const { listener, ready } = listenChannel(url, CREDENTIALS_CHANNEL, {
    ...options,
    onMessage: (payload) => cache?.onMessage(payload),
    onReset: () => cache?.clear(),
  });
  cache = new CredentialCache(listener);
  return { cache, listener, ready, stop: () => listener.stop() };
}

let shared: CredentialCache | undefined;

/**
 * The process's cache, started on first use with the pool's database; undefined when
 * CREDENTIAL_CACHE is off (every lookup then reads the database).
 */
export function credentialCache(): CredentialCache | undefined {
  if (shared) return shared;
  const { CREDENTIAL_CACHE, DATABASE_URL } = env();
  if (!CREDENTIAL_CACHE || !DATABASE_URL) return undefined;
  db(); // the pool first: closing it closes the listener too
  const made = createCredentialCache(DATABASE_URL);
  made.ready.catch(() => {}); // the heartbeat retries; until then the cache stays unused
  shared = made.cache;
  onDbClose(async () => {
    shared = undefined;
    await made.stop();
  });
  return shared;
}
