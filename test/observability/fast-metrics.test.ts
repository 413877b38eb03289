import { Counter, Histogram, Registry } from "prom-client";
import { expect, it } from "vitest";
import { FastCounter, FastHistogram } from "../../app/server/platform/metrics/fast.server.ts";

// The hot path's metrics (fast.server.ts) expose exactly what prom-client's own would for the
// same observations: same buckets (bounds inclusive), sums, counts and labels.

const buckets = [0.01, 0.1, 1];
const observations = [0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 30];

async function exposition(kind: "prom-client" | "fast"): Promise<string> {
  const registry = new Registry();
  const labelNames = ["route", "status_class"] as const;
  const config = { name: "t_seconds", help: "h", labelNames, buckets, registers: [registry] };
  const counted = { name: "t_total", help: "h", labelNames, registers: [registry] };
  const a = { route: "/a", status_class: "2xx" };
  const b = { route: "/b", status_class: "5xx" };
  if (kind === "prom-client") {
    const h = new Histogram(config);
    const c = new Counter(counted);
    for (const v of observations) h.labels(a).observe(v);
    h.labels(b).observe(0.2);
    c.labels(a).inc();
    c.labels(a).inc(41);
    c.labels(b).inc(2);
  } else {
    const h = new FastHistogram(config);
    const c = new FastCounter(counted);
    const [ha, hb, ca, cb] = [h.child(a), h.child(b), c.child(a), c.child(b)];
    for (const v of observations) ha.observe(v);
    hb.observe(0.2);
    ca.inc();
    ca.inc(41);
    cb.inc(2);
    h.child({ route: "/c", status_class: "2xx" }); // never observed: not exposed
  }
  return registry.metrics();
}

it("exposes what prom-client's histogram and counter expose for the same observations", async () => {
  const fast = await exposition("fast");
  expect(fast).toBe(await exposition("prom-client"));
  expect(fast).toContain('t_seconds_bucket{le="0.01",route="/a",status_class="2xx"} 2');
  expect(fast).toContain('t_seconds_bucket{le="+Inf",route="/a",status_class="2xx"} 8');
  expect(fast).toContain('t_total{route="/a",status_class="2xx"} 42');
});

it("counts on across scrapes and starts again from zero after a reset", async () => {
  const registry = new Registry();
  const c = new FastCounter({
    name: "r_total",
    help: "h",
    labelNames: ["k"],
    registers: [registry],
  });
  const h = new FastHistogram({
    name: "r_s",
    help: "h",
    labelNames: ["k"],
    buckets,
    registers: [registry],
  });
  const [ck, hk] = [c.child({ k: "x" }), h.child({ k: "x" })];
  ck.inc(2);
  hk.observe(0.5);
  await registry.metrics();
  ck.inc(3);
  hk.observe(0.5);
  const text = await registry.metrics();
  expect(text).toContain('r_total{k="x"} 5');
  expect(text).toContain('r_s_count{k="x"} 2');
  registry.resetMetrics();
  ck.inc();
  const after = await registry.metrics();
  expect(after).toContain('r_total{k="x"} 1');
  expect(after).not.toContain("r_s_count");
});
