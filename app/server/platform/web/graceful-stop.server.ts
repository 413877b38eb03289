import type { Server, ServerResponse } from "node:http";

// Stopping the web server without waiting on kept-alive connections. `server.close()` closes the
// connections idle at that moment only: a connection whose answer was under way stays open once
// that answer ends (and may carry further requests), so a gateway's kept-alive connection to the
// model endpoint held the process for the whole grace period (issue 52). Answers under way keep
// their grace; each connection closes as soon as its answer ends. Whatever ends the stop (drained
// or the grace expired), `flush` runs before the caller exits: usage in its buffer is not lost.

export interface StopOptions {
  /** How long answers under way may take before their connections are cut. */
  graceMs: number;
  /** Runs after the server stopped on every path (the metering's write-behind buffer). */
  flush: () => Promise<void>;
  /** The most `flush` may take (a database that is gone must not hold the exit). */
  flushTimeoutMs: number;
}

export type StopOutcome = "drained" | "grace expired";

/**
 * Tracks the server's answers under way; call at start-up. The returned function stops the
 * server and resolves once it has closed (or the grace expired) and `flush` has run.
 */
export function gracefulStop(server: Server): (options: StopOptions) => Promise<StopOutcome> {
  const underWay = new Set<ServerResponse>();
  let stopping = false;
  // Ahead of the app's own listener, so that a late request's answer is marked before it starts.
  server.prependListener("request", (_req, res: ServerResponse) => {
    if (stopping) markLast(res);
    underWay.add(res);
    res.once("close", () => underWay.delete(res));
  });

  function markLast(res: ServerResponse) {
    // Sent with the answer, `Connection: close` makes Node end the connection after it.
    if (!res.headersSent) res.setHeader("Connection", "close");
    // Headers already out (a stream): the connection is idle once the answer ends; close it then.
    res.once("finish", () => setImmediate(() => server.closeIdleConnections()));
  }

  return async ({ graceMs, flush, flushTimeoutMs }) => {
    stopping = true;
    for (const res of underWay) markLast(res);
    const outcome = await new Promise<StopOutcome>((resolve) => {
      const timer = setTimeout(() => {
        // Cut what is left so the process can settle its usage and exit now.
        server.closeAllConnections();
        resolve("grace expired");
      }, graceMs);
      server.close(() => {
        clearTimeout(timer);
        resolve("drained");
      });
      server.closeIdleConnections();
    });
    await withTimeout(flush(), flushTimeoutMs);
    return outcome;
  };
}

async function withTimeout(work: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  try {
    await Promise.race([work.catch(() => {}), expired]);
  } finally {
    clearTimeout(timer);
  }
}
