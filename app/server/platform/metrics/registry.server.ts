import { collectDefaultMetrics, Registry } from "prom-client";
import { env } from "../env.server.ts";

// The process's one Prometheus registry (docs/decisions/0202). The platform and every area
// register their metrics on it; GET /metrics (web) and the worker's listener expose it. Labels
// are bounded sets only: route templates, status classes, providers, model families, states,
// queues, nodes — never a user, an email or an agent.

export const registry = new Registry();

/** Metric names start with this (the standard process_* and nodejs_* ones do not). */
export const PREFIX = "platform_";

let processMetrics = false;

/** CPU, memory, event-loop lag and GC of this process (once; the entries call it). */
export function collectProcessMetrics(): void {
  if (processMetrics) return;
  processMetrics = true;
  collectDefaultMetrics({ register: registry });
}

/** Buckets (seconds) of lifecycle operations: a second up to the 30 minutes a drain may take. */
export const OPERATION_BUCKETS = [1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800];

/**
 * Whether the web records its request and AI metrics: only while /metrics can be read
 * (METRICS_TOKEN set), so an installation without Prometheus pays nothing for them.
 */
export function metricsEnabled(): boolean {
  return env().METRICS_TOKEN !== undefined;
}
