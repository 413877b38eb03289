import { type ActionOutcome, getInstance } from "../../app/server/agents/instances.server.ts";
import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { BOOT_ACTIONS, runAction } from "../instances/actions.ts";
import { queueAgentSync } from "../instances/agents-sync.ts";
import { isNoCapacity, isUnavailable, log } from "../instances/engine.ts";
import { withInstanceLock } from "../instances/lock.ts";
import { queueWarmUp } from "../instances/warm-up.ts";
import type { JobContext } from "./context.ts";

/**
 * A lifecycle request the web awaits. The outcome (never a throw) is the job's output, so the
 * web tells "backend unavailable" (502) from other failures (500).
 */
export async function instanceAction(
  payload: JobPayload<"instance-action">,
  ctx?: JobContext,
): Promise<ActionOutcome> {
  const act = async (): Promise<ActionOutcome> => {
    const row = await getInstance(payload.instanceId);
    if (!row) return { ok: false, failure: "internal", message: "no such instance" };
    return runAction(row, payload.action, ctx?.signal);
  };
  try {
    // A boot takes the lock itself, only for its steps (it waits for a boot slot without it).
    const done = BOOT_ACTIONS.has(payload.action)
      ? act()
      : withInstanceLock(payload.instanceId, act);
    return await done.then(async (outcome) => {
      // An instance that came back gets its stored agents re-applied, and its dry run.
      if (outcome.ok && BOOT_ACTIONS.has(payload.action)) {
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
