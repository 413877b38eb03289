import { describe, expect, it } from "vitest";
import {
  operationOf,
  reconcileOutcome,
  recordJob,
  recordReconcilePass,
} from "../../worker/metrics.ts";
import { sample } from "./support.ts";

// The worker's metrics (issue 51): lifecycle operations timed from their request, reconcile
// passes with their repairs and failures.

describe("lifecycle operation durations", () => {
  it("name the operations among the jobs (an instance action by its action)", () => {
    expect(operationOf("provision-instance", { instanceId: "i" })).toBe("provision");
    expect(operationOf("wake-instance", { instanceId: "i" })).toBe("wake");
    expect(operationOf("restore-backup", { backupId: "b" })).toBe("restore");
    expect(operationOf("update-image", { instanceId: "i" })).toBe("update");
    expect(operationOf("drain-node", { nodeId: "n" })).toBe("drain");
    expect(operationOf("instance-action", { instanceId: "i", action: "start" })).toBe("start");
    expect(operationOf("send-email", {})).toBeUndefined();
  });

  it("count from the job's creation, so the wait in the queue is part of it", async () => {
    const labels = { operation: "wake", outcome: "ok" };
    const under60 = await sample("platform_instance_operation_duration_seconds_bucket", {
      ...labels,
      le: 60,
    });
    const under300 = await sample("platform_instance_operation_duration_seconds_bucket", {
      ...labels,
      le: 300,
    });
    // Ran 2 s, asked for 90 s ago.
    recordJob("wake-instance", { instanceId: "i" }, "ok", 2, new Date(Date.now() - 90_000));
    expect(
      await sample("platform_instance_operation_duration_seconds_bucket", { ...labels, le: 60 }),
    ).toBe(under60);
    expect(
      await sample("platform_instance_operation_duration_seconds_bucket", { ...labels, le: 300 }),
    ).toBe(under300 + 1);
    expect(
      await sample("platform_job_duration_seconds_count", {
        queue: "wake-instance",
        outcome: "ok",
      }),
    ).toBeGreaterThanOrEqual(1);
  });

  it("have buckets up to 30 minutes", async () => {
    recordJob("drain-node", { nodeId: "n" }, "ok", 1700, new Date(Date.now() - 1_700_000));
    expect(
      await sample("platform_instance_operation_duration_seconds_bucket", {
        operation: "drain",
        le: 1800,
      }),
    ).toBe(1);
  });
});

describe("reconcile passes", () => {
  it("tell repairs and failures from instances left alone", () => {
    expect(reconcileOutcome("ok")).toBe("ok");
    expect(reconcileOutcome("sleeping")).toBe("ok");
    expect(reconcileOutcome("busy")).toBe("ok");
    expect(reconcileOutcome("crashed, restarted")).toBe("repair");
    expect(reconcileOutcome("ok, platform config brought up to date")).toBe("repair");
    expect(reconcileOutcome("error: boom")).toBe("failure");
    expect(reconcileOutcome("unavailable: engine down")).toBe("failure");
  });

  it("are counted with their repairs and failures", async () => {
    const passes = await sample("platform_reconcile_passes_total");
    const repairs = await sample("platform_reconcile_repairs_total");
    const failures = await sample("platform_reconcile_failures_total");
    recordReconcilePass(["ok", "crashed, restarted", "error: x"], 2);
    expect(await sample("platform_reconcile_passes_total")).toBe(passes + 1);
    expect(await sample("platform_reconcile_repairs_total")).toBe(repairs + 3);
    expect(await sample("platform_reconcile_failures_total")).toBe(failures + 1);
  });
});
