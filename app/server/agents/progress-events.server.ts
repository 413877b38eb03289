import type { LiveCredential } from "../accounts/credential-watch.server.ts";
import { connectionSlots } from "../platform/connection-slots.server.ts";
import { onDbClose } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { type ChannelListener, listenChannel } from "../platform/pg-channel.server.ts";
import { shutdownSignal } from "../platform/shutdown.server.ts";
import { getOwnedAgent } from "./agents.server.ts";
import { agentStatus, getInstanceByUser } from "./instances.server.ts";
import { guardLive, REVOKED } from "./live-access.server.ts";
import { instanceProgress, STARTING_STATUSES } from "./progress.server.ts";

// Pushed progress (issue 25, decision 0158): GET /api/agents/:id/events streams the agent's
// start-up as server-sent events. Triggers (migration 0085) NOTIFY `instance_progress` with the
// instance id on every step, run and state change, whichever process wrote it; each web replica
// keeps one LISTEN connection and wakes the streams of that instance, which re-read the progress
// from the database (the notification carries no data, so a missed one costs only latency: the
// streams also re-read on every keep-alive, and at once when the listener reconnects).
// A stream lives only as long as its credential: when it is revoked (or the agent is no longer
// the user's) an `error` event {error: "credential revoked"} ends it (decision 0198).

export const PROGRESS_CHANNEL = "instance_progress";
/** A stream ends after this long; EventSource reconnects on its own. */
const MAX_STREAM_MS = 10 * 60_000;

type Wake = () => void;
const watchers = new Map<string, Set<Wake>>();
/** Open streams per user on this replica (PROGRESS_STREAMS_PER_USER; one more answers 429). */
const slots = connectionSlots();
let listener: ChannelListener | undefined;

function wakeAll() {
  for (const set of watchers.values()) for (const wake of set) wake();
}

/** The replica's one listener, started with its first stream. */
function ensureListener() {
  if (listener) return;
  const url = env().DATABASE_URL;
  if (!url) return;
  const made = listenChannel(url, PROGRESS_CHANNEL, {
    onMessage: (instanceId) => {
      for (const wake of watchers.get(instanceId) ?? []) wake();
    },
    // Messages may have been missed: everyone re-reads.
    onReset: wakeAll,
  });
  listener = made.listener;
  made.ready.catch((error: unknown) =>
    logger().warn({ err: error }, "progress listener cannot connect yet"),
  );
  onDbClose(async () => {
    const stopping = listener;
    listener = undefined;
    await stopping?.stop();
  });
}

function watch(instanceId: string, wake: Wake): () => void {
  const set = watchers.get(instanceId) ?? new Set<Wake>();
  watchers.set(instanceId, set);
  set.add(wake);
  return () => {
    set.delete(wake);
    if (set.size === 0) watchers.delete(instanceId);
  };
}

/** What one event carries: the agent's status and its current start-up. */
export async function progressSnapshot(userId: string) {
  const instance = await getInstanceByUser(userId);
  const status = agentStatus(instance);
  const progress = await instanceProgress(instance);
  return {
    instanceId: instance?.id ?? null,
    snapshot: {
      status,
      action: progress.action,
      startedAt: progress.startedAt,
      step: progress.step,
      progress: progress.steps,
      estimate: progress.estimate,
      lastError: status === "error" ? (instance?.last_error ?? null) : null,
    },
    // A running agent whose run is still open is about to record `ready`: worth waiting for.
    going: STARTING_STATUSES.includes(status) || (status === "running" && progress.open),
  };
}

const encoder = new TextEncoder();
const frame = (event: string, data: unknown) =>
  encoder.encode(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);

/**
 * The event stream of one owned agent: a `progress` event now and at every change, then `done`
 * once the agent is no longer starting, and the stream ends. A comment every keep-alive
 * interval holds proxies open. A non-owned agent is 404; too many open streams 429.
 */
export async function progressEvents(
  credential: LiveCredential,
  ownerId: string,
  agentId: string,
  request: Request,
) {
  const signal = request.signal;
  // The Request is held until the stream closes: undici unlinks a Request's signal from the one
  // it follows once the Request is garbage-collected, so a client's going away would never reach
  // `signal` and its slot would stay taken (seen in npm test, reproduced with --expose-gc).
  const held: { request?: Request } = { request };
  const userId = ownerId;
  await getOwnedAgent(userId, agentId);
  const cap = env().PROGRESS_STREAMS_PER_USER;
  const release = slots.take({ key: userId, cap });
  if (!release) throw new DomainError(429, `Too many open event streams: at most ${cap}`);
  ensureListener();
  const keepAliveMs = env().PROGRESS_KEEPALIVE_MS;
  let cleanup: () => void = () => {};

  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      let closed = false;
      let last = "";
      let reading: Promise<void> | undefined;
      let again = false;
      let unwatch = () => {};
      let unguard = () => {};
      const timers: NodeJS.Timeout[] = [];

      const close = () => {
        if (closed) return;
        closed = true;
        held.request = undefined;
        for (const t of timers) clearTimeout(t);
        unwatch();
        unguard();
        signal.removeEventListener("abort", close);
        shutdownSignal().removeEventListener("abort", close);
        release();
        try {
          controller.close();
        } catch {
          // Already closed by the reader going away.
        }
      };
      cleanup = close;

      // One read at a time; a wake during a read reads once more after it.
      const read = (): Promise<void> => {
        if (reading) {
          again = true;
          return reading;
        }
        reading = (async () => {
          do {
            again = false;
            const { instanceId, snapshot, going } = await progressSnapshot(userId);
            if (closed) return;
            if (instanceId) {
              unwatch();
              unwatch = watch(instanceId, () => void read());
            }
            const text = JSON.stringify(snapshot);
            if (text !== last) {
              last = text;
              controller.enqueue(frame("progress", { ...snapshot, at: new Date().toISOString() }));
            }
            if (!going) {
              controller.enqueue(frame("done", { status: snapshot.status }));
              close();
              return;
            }
          } while (again && !closed);
        })()
          .catch((error: unknown) => {
            logger().warn({ err: error, agentId }, "progress stream read failed");
            if (!closed) controller.enqueue(encoder.encode(": read failed, retrying\n\n"));
          })
          .finally(() => {
            reading = undefined;
          });
        return reading;
      };

      const keepAlive = () => {
        if (closed) return;
        controller.enqueue(encoder.encode(": keep-alive\n\n"));
        void read();
        timers.push(setTimeout(keepAlive, keepAliveMs));
      };
      timers.push(setTimeout(keepAlive, keepAliveMs));
      timers.push(setTimeout(close, MAX_STREAM_MS));
      signal.addEventListener("abort", close);
      shutdownSignal().addEventListener("abort", close);
      unguard = guardLive(
        credential,
        { ownerId: userId, agentId, permission: "agents.read" },
        () => {
          if (closed) return;
          controller.enqueue(frame("error", { error: REVOKED }));
          close();
        },
      );
      // How soon EventSource reconnects when the stream ends early (a restart, the lifetime bound).
      controller.enqueue(encoder.encode("retry: 3000\n\n"));
      void read();
    },
    cancel() {
      cleanup();
    },
  });
  return new Response(stream, {
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      "x-accel-buffering": "no",
    },
  });
}

/** Streams open on this replica (tests and the operator's view). */
export const openProgressStreams = () => slots.total();
