import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { logger } from "./logger.server.ts";

// A PostgreSQL LISTEN on its own connection, with a way to know it is really hearing: every
// `heartbeatMs` the listener NOTIFYs itself on the channel, and it counts as live only while
// its last echo is younger than `staleAfterMs`. A caller that keeps state invalidated by the
// channel trusts that state only while `live()`; `generation` moves every time the listener
// may have missed a message (a closed, silent or new connection), so that state kept under an
// older generation is dropped rather than trusted. docs/decisions/0120-credential-cache.md

export interface ChannelListener {
  /** True while the connection listens and its last heartbeat echo is fresh. */
  live(): boolean;
  /** Moves whenever messages may have been missed: state from older generations is stale. */
  readonly generation: number;
  stop(): Promise<void>;
}

export interface ChannelOptions {
  heartbeatMs?: number;
  staleAfterMs?: number;
  /** Called with every message but the heartbeats, and whenever `generation` moves. */
  onMessage(payload: string): void;
  onReset(): void;
}

/** A heartbeat's payload, `ping:<listener>:<ms>`, whichever listener sent it. */
const HEARTBEAT = /^ping:[0-9a-f]{16}:\d+$/;

export function listenChannel(url: string, channel: string, options: ChannelOptions) {
  const heartbeatMs = options.heartbeatMs ?? 1000;
  const staleAfterMs = options.staleAfterMs ?? 3 * heartbeatMs;
  const ping = `ping:${randomBytes(8).toString("hex")}:`;
  let sql: postgres.Sql | undefined;
  let listening = false;
  let lastEchoAt = 0;
  let stopped = false;
  let connecting: Promise<void> | undefined;

  const state = {
    generation: 0,
    live: () => listening && Date.now() - lastEchoAt <= staleAfterMs,
    async stop() {
      stopped = true;
      clearInterval(timer);
      reset();
      await sql?.end({ timeout: 1 });
    },
  };

  function reset() {
    listening = false;
    state.generation++;
    options.onReset();
  }

  function connect(): Promise<void> {
    connecting ??= (async () => {
      const old = sql;
      sql = undefined;
      await old?.end({ timeout: 0 }).catch(() => {});
      if (stopped) return;
      // postgres.js delivers NOTIFY messages to `onnotify` (its own listen() hides the
      // connection's close, which this needs to see): not in its option types.
      const notify = {
        onnotify: (name: string, payload: string) => {
          if (name !== channel || conn !== sql) return;
          // Every listener on the channel hears every listener's heartbeats (other uses in this
          // process, other replicas): only its own is an echo, none is a message. Passed on,
          // another's heartbeat was an unknown message a second, which emptied the credential
          // cache and rechecked every open live socket (decision 0220).
          if (HEARTBEAT.test(payload)) {
            if (payload.startsWith(ping)) lastEchoAt = Number(payload.slice(ping.length));
            return;
          }
          options.onMessage(payload);
        },
      };
      const conn: postgres.Sql = postgres(url, {
        ...notify,
        max: 1,
        idle_timeout: 0,
        max_lifetime: null,
        fetch_types: false,
        connect_timeout: 5,
        onnotice: () => {},
        connection: { application_name: `agent-platform:${process.pid}:listen` },
        // Anything sent while the connection was down is lost: start a new generation.
        onclose: () => {
          if (conn === sql) reset();
        },
      });
      sql = conn;
      await conn.unsafe(`listen "${channel.replace(/"/g, '""')}"`);
      // Live from the first echo on: the LISTEN is in place before it.
      reset();
      listening = true;
      await beat();
    })().finally(() => {
      connecting = undefined;
    });
    return connecting;
  }

  async function beat() {
    await sql?.unsafe("select pg_notify($1, $2)", [channel, `${ping}${Date.now()}`]);
  }

  const timer = setInterval(() => {
    if (stopped || connecting) return;
    // Closed, or silent for too long (a dead peer): new connection, new generation.
    if (!listening || Date.now() - lastEchoAt > staleAfterMs) {
      if (listening) reset();
      connect().catch((error: unknown) =>
        logger().warn({ err: error, channel }, "channel listener cannot connect"),
      );
      return;
    }
    beat().catch(() => {});
  }, heartbeatMs);
  timer.unref();

  const ready = connect();
  return { listener: state as ChannelListener, ready };
}
