// `npm start` runs the embedded PostgreSQL as a server of its own (pg_ctl), not as a child it
// supervises: when that server dies (killed, out of memory) nothing would start it again, and
// web and worker answer 503 until someone does. This watch starts it again on the same port, so
// the URL the children hold stays valid; a start that fails (the dead server's backends still
// hold its shared memory for a moment) is retried with back-off.

export interface WatchedDatabase {
  running(): Promise<boolean>;
  restart(): Promise<void>;
}

export type DatabaseWatchEvent =
  | { kind: "down" }
  | { kind: "restarted"; downMs: number }
  | { kind: "restart-failed"; error: string; retryInMs: number };

export interface DatabaseWatchOptions {
  intervalMs?: number;
  maxBackoffMs?: number;
  /** Every down, restart and failed restart; tests wait on these instead of sleeping. */
  onEvent: (event: DatabaseWatchEvent) => void;
}

export function keepDatabaseRunning(
  database: WatchedDatabase,
  { intervalMs = 2_000, maxBackoffMs = 30_000, onEvent }: DatabaseWatchOptions,
): { stop(): void } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let downSince: number | undefined;
  let backoffMs = intervalMs;

  const next = (delayMs: number) => {
    if (!stopped) timer = setTimeout(() => void check(), delayMs);
  };

  async function check() {
    if (await database.running().catch(() => false)) {
      next(intervalMs);
      return;
    }
    if (stopped) return; // a stop that came while status ran: the database is meant to go
    if (downSince === undefined) {
      downSince = Date.now();
      onEvent({ kind: "down" });
    }
    try {
      await database.restart();
      onEvent({ kind: "restarted", downMs: Date.now() - downSince });
      downSince = undefined;
      backoffMs = intervalMs;
      next(intervalMs);
    } catch (error) {
      const retryInMs = backoffMs;
      backoffMs = Math.min(backoffMs * 2, maxBackoffMs);
      onEvent({ kind: "restart-failed", error: (error as Error).message, retryInMs });
      next(retryInMs);
    }
  }

  next(intervalMs);
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
