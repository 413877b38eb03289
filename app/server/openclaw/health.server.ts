import { GatewayUnavailableError } from "./errors.server.ts";

// A gateway's HTTP health endpoint (/healthz), which answers before the control protocol does.

/** Waits until `url` answers 200 (the gateway's /healthz) or the timeout passes. */
export async function waitForHttpOk(
  url: string,
  {
    timeoutMs = 120_000,
    intervalMs = 250,
    signal,
  }: { timeoutMs?: number; intervalMs?: number; signal?: AbortSignal } = {},
): Promise<number> {
  const started = Date.now();
  for (;;) {
    // Not listening yet (connection refused or reset right after start) reads as not ok.
    const ok = await bounded(3_000, false, async (probeSignal) => {
      const res = await fetch(url, { signal: probeSignal });
      await res.body?.cancel();
      return res.ok;
    });
    if (ok) return Date.now() - started;
    if (signal?.aborted) throw new Error("aborted");
    if (Date.now() - started > timeoutMs) {
      throw new GatewayUnavailableError(`${url} did not answer 200 within ${timeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Whether the gateway's /healthz answers 200 right now. */
export async function gatewayHealthy(address: string, timeoutMs = 3_000): Promise<boolean> {
  return bounded(timeoutMs, false, async (signal) => {
    const res = await fetch(`http://${address}/healthz`, { signal });
    await res.body?.cancel();
    return res.ok;
  });
}

/**
 * A probe that settles within `timeoutMs` (plus a second) whatever happens: the abort signal
 * bounds the request, and the race bounds the rest (the body's cancel, an interceptor), since a
 * lifecycle step waits on the probe under the instance's lock. Two full CI runs had an update's
 * rollback sit out its test's bound with the engine and the database idle, awaiting a probe.
 */
async function bounded<T>(
  timeoutMs: number,
  fallback: T,
  probe: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(fallback), timeoutMs + 1_000);
  });
  try {
    return await Promise.race([probe(AbortSignal.timeout(timeoutMs)).catch(() => fallback), late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The gateway's /readyz right now: `ready` (200), `not-ready` (an error status: OpenClaw
 * 2026.9.6 answers 503 while it migrates retained state, after /healthz already says ok), or
 * `unsupported` (404: a gateway without the endpoint, where /healthz is all there is).
 */
export async function gatewayReadiness(
  address: string,
  timeoutMs = 3_000,
): Promise<"ready" | "not-ready" | "unsupported"> {
  return bounded(timeoutMs, "not-ready" as const, async (signal) => {
    const res = await fetch(`http://${address}/readyz`, { signal });
    await res.body?.cancel();
    if (res.ok) return "ready";
    return res.status === 404 ? "unsupported" : "not-ready";
  });
}
