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
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(3_000) });
      await res.body?.cancel();
      if (res.ok) return Date.now() - started;
    } catch {
      // not listening yet (connection refused or reset right after start)
    }
    if (signal?.aborted) throw new Error("aborted");
    if (Date.now() - started > timeoutMs) {
      throw new GatewayUnavailableError(`${url} did not answer 200 within ${timeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Whether the gateway's /healthz answers 200 right now. */
export async function gatewayHealthy(address: string, timeoutMs = 3_000): Promise<boolean> {
  try {
    const res = await fetch(`http://${address}/healthz`, {
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.body?.cancel();
    return res.ok;
  } catch {
    return false;
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
  try {
    const res = await fetch(`http://${address}/readyz`, { signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
    if (res.ok) return "ready";
    return res.status === 404 ? "unsupported" : "not-ready";
  } catch {
    return "not-ready";
  }
}
