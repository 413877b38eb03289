import { type ActionOutcome, getInstance } from "../../app/server/agents/instances.server.ts";
import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { runAction } from "../instances/actions.ts";
import { queueAgentSync } from "../instances/agents-sync.ts";
import { isNoCapacity, isUnavailable, log } from "../instances/engine.ts";
import { withInstanceLock } from "../instances/lock.ts";
import { queueWarmUp } from "../instances/warm-up.ts";

/**
 * A lifecycle request the web awaits. The outcome (never a throw) is the job's output, so the
 * web tells "backend unavailable" (502) from other failures (500).
 */
export async function instanceAction(
  payload: JobPayload<"instance-action">,
): Promise<ActionOutcome> {
  try {
    return await withInstanceLock(payload.instanceId, async (): Promise<ActionOutcome> => {
      const row = await getInstance(payload.instanceId);
      if (!row) return { ok: false, failure: "internal", message: "no such instance" };
      return runAction(row, payload.action);
    }).then(async (outcome) => {
      // An instance that came back gets its stored agents re-applied, and its dry run.
      if (outcome.ok && ["start", "restart", "repair"].includes(payload.action)) {
        await queueAgentSync(payload.instanceId);
        await queueWarmUp(payload.instanceId);
      }
      return outcome;
    });
  } catch (error) {
    log().warn({ err: error, ...payload }, "instance action failed");
    return {
      ok: false,
      failure: isNoCapacity(error) ? "capacity" : isUnavailable(error) ? "unavailable" : "internal",
      message: (error as Error).message.slice(0, 500),
    };
  }
}
