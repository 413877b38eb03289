import { recordDrain, recordNodes } from "../../app/server/ops/nodes.server.ts";
import { isClusterRuntime } from "../runtime/index.ts";
import { drainNode } from "./drain.ts";
import { log, rt } from "./engine.ts";

// What the operator console shows of the nodes (runtime_nodes), recorded by the worker: on each
// reconcile and after a drain. A single-node driver records nothing.

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
