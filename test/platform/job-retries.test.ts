import { expect, it } from "vitest";
import { jobCatalog } from "../../app/server/platform/jobs.server.ts";

// Jobs the platform must not lose to an engine outage retry for longer than one (the soak's
// engine fault: 30 s, the engine's own restart ~6 s more). Nominal delays: retryDelay doubling
// with retryBackoff, capped at retryDelayMax (pg-boss adds jitter on top).

function retrySpanSeconds(name: keyof typeof jobCatalog): { first: number; total: number } {
  const q = jobCatalog[name].queue as {
    retryLimit?: number;
    retryDelay?: number;
    retryBackoff?: boolean;
    retryDelayMax?: number;
  };
  const delays = Array.from({ length: q.retryLimit ?? 0 }, (_, i) => {
    const d = (q.retryDelay ?? 0) * (q.retryBackoff ? 2 ** i : 1);
    return Math.min(d, q.retryDelayMax ?? Number.POSITIVE_INFINITY);
  });
  return { first: delays[0] ?? 0, total: delays.reduce((a, b) => a + b, 0) };
}

it("a provision retries at once after a dead worker, and for minutes through an engine outage", () => {
  const span = retrySpanSeconds("provision-instance");
  expect(span.first).toBeLessThanOrEqual(2);
  expect(span.total).toBeGreaterThanOrEqual(180);
});

it("an update outlasts an engine outage too", () => {
  expect(retrySpanSeconds("update-image").total).toBeGreaterThanOrEqual(180);
});
