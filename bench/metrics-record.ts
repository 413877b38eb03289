// What recording the Prometheus metrics adds to a request, measured directly (issue 51): the
// on/off rows of `npm run bench` compare two web processes, and their run-to-run spread (±7 %)
// is wider than the goal; this times the recording itself, in this process, against the same
// calls with recording off. `node bench/metrics-record.ts` prints it alone.
import { performance } from "node:perf_hooks";
import { resetEnvCache } from "../app/server/platform/env.server.ts";

const ROUNDS = 5;
const CALLS = 200_000;

/** Nanoseconds per call of `fn`, the best of ROUNDS rounds (the least disturbed). */
function nsPerCall(fn: () => void): number {
  let best = Number.POSITIVE_INFINITY;
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = performance.now();
    for (let i = 0; i < CALLS; i++) fn();
    best = Math.min(best, ((performance.now() - t0) * 1e6) / CALLS);
  }
  return best;
}

export interface RecordingCost {
  /** A request's HTTP counter and histogram. */
  httpNs: number;
  /** An AI call: its request's, plus the call, latency, tokens, charge, overhead and hold. */
  aiNs: number;
  /** The same AI call's recording functions with METRICS_TOKEN unset (they return at once). */
  aiOffNs: number;
}

export async function recordingCost(): Promise<RecordingCost> {
  const { httpRoute } = await import("../app/server/platform/metrics/http.server.ts");
  const ai = await import("../app/server/ai/ai-metrics.server.ts");
  const route = httpRoute("/api/ai/v1/chat/completions");
  const call = {
    provider: "openai",
    model: "gpt-4o-mini",
    status: "ok" as const,
    latencyMs: 180,
    promptTokens: 1200,
    completionTokens: 300,
    costMicroUsd: 360,
  };
  const aiCall = () => {
    route.record("POST", 200, 0.18);
    ai.recordAiCall(call);
    ai.recordAiOverhead(1.2);
    ai.recordHeld(900);
  };
  const token = process.env.METRICS_TOKEN;
  try {
    delete process.env.METRICS_TOKEN;
    resetEnvCache();
    const aiOffNs = nsPerCall(aiCall) - nsPerCall(() => route.record("POST", 200, 0.18));
    process.env.METRICS_TOKEN = "bench-recording-cost";
    resetEnvCache();
    return {
      httpNs: nsPerCall(() => route.record("GET", 200, 0.004)),
      aiNs: nsPerCall(aiCall),
      aiOffNs,
    };
  } finally {
    if (token === undefined) delete process.env.METRICS_TOKEN;
    else process.env.METRICS_TOKEN = token;
    resetEnvCache();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const cost = await recordingCost();
  console.warn(
    `recording per request: HTTP ${cost.httpNs.toFixed(0)} ns; an AI call ${cost.aiNs.toFixed(0)} ns (off: ${Math.max(0, cost.aiOffNs).toFixed(0)} ns)`,
  );
}
