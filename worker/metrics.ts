import { Counter, Histogram } from "prom-client";
import {
  OPERATION_BUCKETS,
  PREFIX,
  registry,
} from "../app/server/platform/metrics/registry.server.ts";

// The worker's own Prometheus metrics (docs/decisions/0202), recorded where the work happens:
// jobs, lifecycle operations, the warm pool's adoptions and the reconcile passes. Counters and
// histograms per process; Prometheus sums them over the workers.

const jobSeconds = new Histogram({
  name: `${PREFIX}job_duration_seconds`,
  help: "Background jobs from being run by a worker to their end, by queue and outcome",
  labelNames: ["queue", "outcome"] as const,
  buckets: [0.05, 0.25, ...OPERATION_BUCKETS],
  registers: [registry],
});

const operationSeconds = new Histogram({
  name: `${PREFIX}instance_operation_duration_seconds`,
  help:
    "Lifecycle operations (provision, start, stop, restart, wake, restore, update, drain, …) " +
    "from their request (the job's creation) to their end, by outcome",
  labelNames: ["operation", "outcome"] as const,
  buckets: OPERATION_BUCKETS,
  registers: [registry],
});

const adoptions = new Counter({
  name: `${PREFIX}pool_adoptions_total`,
  help: "Provisions that adopted a warm pooled gateway",
  registers: [registry],
});
const misses = new Counter({
  name: `${PREFIX}pool_misses_total`,
  help: "Provisions that wanted a pooled gateway and booted cold (empty, failed, resize)",
  labelNames: ["reason"] as const,
  registers: [registry],
});

const reconcilePasses = new Counter({
  name: `${PREFIX}reconcile_passes_total`,
  help: "Reconcile passes over every instance",
  registers: [registry],
});
const reconcileRepairs = new Counter({
  name: `${PREFIX}reconcile_repairs_total`,
  help: "Things a reconcile pass put right (an instance restarted or resumed, an orphan removed…)",
  registers: [registry],
});
const reconcileFailures = new Counter({
  name: `${PREFIX}reconcile_failures_total`,
  help: "Instances a reconcile pass could not bring to their desired state",
  registers: [registry],
});

/** The lifecycle operation a job is, if it is one (instance-action by its action). */
export function operationOf(queue: string, data: unknown): string | undefined {
  switch (queue) {
    case "provision-instance":
      return "provision";
    case "wake-instance":
      return "wake";
    case "restore-backup":
      return "restore";
    case "update-image":
      return "update";
    case "drain-node":
      return "drain";
    case "backup-agent":
      return "backup";
    case "instance-action": {
      const action = (data as { action?: unknown } | null)?.action;
      return typeof action === "string" ? action : undefined;
    }
    default:
      return undefined;
  }
}

/** One job's end: its run time, and for an operation the time since it was asked for. */
export function recordJob(
  queue: string,
  data: unknown,
  outcome: "ok" | "error",
  runSeconds: number,
  createdOn: Date | undefined,
): void {
  jobSeconds.observe({ queue, outcome }, runSeconds);
  const operation = operationOf(queue, data);
  if (operation && createdOn) {
    operationSeconds.observe(
      { operation, outcome },
      Math.max(runSeconds, (Date.now() - createdOn.getTime()) / 1000),
    );
  }
}

export function recordAdoption(): void {
  adoptions.inc();
}

export function recordPoolMiss(reason: "empty" | "failed" | "resize"): void {
  misses.inc({ reason });
}

/** reconcileOne's answer for an instance whose restart was queued by an earlier pass. */
export const RESTART_UNDER_WAY = "restart under way";

/** What reconcileOne's answer says it did: nothing to do, a repair, or a failure. */
export function reconcileOutcome(result: string): "ok" | "repair" | "failure" {
  if (result.startsWith("error:") || result.startsWith("unavailable:")) return "failure";
  const quiet = ["ok", "sleeping", "not provisioned", "busy", "gone", RESTART_UNDER_WAY];
  return quiet.includes(result) ? "ok" : "repair";
}

export function recordReconcilePass(results: string[], otherRepairs: number): void {
  reconcilePasses.inc();
  let repairs = otherRepairs;
  let failures = 0;
  for (const result of results) {
    const outcome = reconcileOutcome(result);
    if (outcome === "repair") repairs++;
    else if (outcome === "failure") failures++;
  }
  if (repairs > 0) reconcileRepairs.inc(repairs);
  if (failures > 0) reconcileFailures.inc(failures);
}
