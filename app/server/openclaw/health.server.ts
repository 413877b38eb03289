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
