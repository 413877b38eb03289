import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import type { Logger } from "pino";
import { isTrustedPeer } from "./client-ip.server.ts";

// One request id per request (docs/decisions/0202): taken from X-Request-Id only when the
// socket's peer is a trusted proxy (TRUSTED_PROXIES, as for X-Forwarded-For; anyone else could
// pick ids that collide with others'), generated otherwise. It rides in an AsyncLocalStorage,
// so every log line of the request (logger() gives a child bound to it), and every job it
// enqueues (sendJob), carries it; the worker runs that job under the same id.

export interface LogContext {
  readonly bindings: { readonly requestId: string };
  /** The logger child of this context, made when the first line is logged. */
  log?: Logger;
}

const storage = new AsyncLocalStorage<LogContext>();

/** What a request id may look like (what an incoming one is checked against). */
export const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

/** An incoming id when the peer is trusted and it is well-formed; otherwise a new one. */
export function requestIdFor(
  header: string | string[] | null | undefined,
  remoteAddress: string | undefined,
): string {
  if (typeof header === "string" && REQUEST_ID.test(header) && isTrustedPeer(remoteAddress)) {
    return header;
  }
  return randomUUID();
}

/** Runs `fn(...args)` with `requestId` as the id of everything it logs and enqueues. */
export function runWithRequestId<A extends unknown[], R>(
  requestId: string,
  fn: (...args: A) => R,
  ...args: A
): R {
  return storage.run({ bindings: { requestId } }, fn, ...args);
}

export function currentLogContext(): LogContext | undefined {
  return storage.getStore();
}

export function currentRequestId(): string | undefined {
  return storage.getStore()?.bindings.requestId;
}
