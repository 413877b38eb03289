// Plain Node (no vitest, no msw): the benches use it through the swarm cluster support.

/** Polls until `check` returns a value (not undefined/false) or the deadline passes. */
export async function waitFor<T>(
  check: () => Promise<T | undefined | false>,
  { timeoutMs = 60_000, intervalMs = 200, what = "condition" } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${(lastError as Error).message}` : ""}`,
      );
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
