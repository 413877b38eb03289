import { recordDrain, recordNodes, recordRecovery } from "../../app/server/ops/nodes.server.ts";
import { isClusterRuntime } from "../runtime/index.ts";
import { drainNode } from "./drain.ts";
import { log, rt } from "./engine.ts";
import { type Recovery, recoverLostInstances } from "./recover.ts";

// What the operator console shows of the nodes (runtime_nodes), recorded by the worker: on each
// reconcile and after a drain or a recovery. A single-node driver records nothing.

export async function recordClusterNodes(): Promise<void> {
  const runtime = rt();
  if (!isClusterRuntime(runtime)) return;
  await recordNodes(await runtime.nodes());
}

/** The drain-node job: drains, records the outcome and the nodes as they are now. */
export async function runDrainJob(nodeId: string) {
  await recordDrain(nodeId, "running");
  try {
    const report = await drainNode(nodeId);
    const failed = report.moved.find((m) => !m.ok);
    await recordClusterNodes();
    await recordDrain(
      nodeId,
      report.done ? "done" : "failed",
      failed ? `${failed.instanceId}: ${failed.error}` : undefined,
    );
    return report;
  } catch (error) {
    log().warn({ nodeId, err: error }, "drain failed");
    await recordClusterNodes().catch(() => {});
    await recordDrain(nodeId, "failed", (error as Error).message);
    return { nodeId, moved: [], done: false, error: (error as Error).message };
  }
}

/** What came of a recovery, in a line for the console: counts, and the first failure's reason. */
export function recoverySummary(recovered: Recovery[]): string {
  if (recovered.length === 0) return "no instance was left on the node";
  const count = (outcome: Recovery["outcome"]) =>
    recovered.filter((r) => r.outcome === outcome).length;
  const parts = [`${count("recreated")} re-created from backups`];
  if (count("reported")) parts.push(`${count("reported")} without a backup, reported`);
  const failed = recovered.find((r) => r.outcome === "failed");
  if (failed) parts.push(`${count("failed")} failed (${failed.instanceId}: ${failed.message})`);
  return parts.join("; ");
}

/** The recover-node job: re-creates the node's instances, records the outcome and the nodes. */
export async function runRecoveryJob(nodeId: string) {
  await recordRecovery(nodeId, "running");
  try {
    const recovered = await recoverLostInstances(nodeId);
    await recordClusterNodes();
    const failed = recovered.some((r) => r.outcome === "failed");
    await recordRecovery(nodeId, failed ? "failed" : "done", recoverySummary(recovered));
    return { nodeId, recovered };
  } catch (error) {
    log().warn({ nodeId, err: error }, "recovery failed");
    await recordClusterNodes().catch(() => {});
    await recordRecovery(nodeId, "failed", (error as Error).message);
    return { nodeId, recovered: [], error: (error as Error).message };
  }
}
