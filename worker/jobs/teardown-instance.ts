import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { teardown } from "../instances/teardown.ts";

/**
 * Removes a deleted user's instance, or the instance of a user's deleted last agent (by id):
 * container, state volume, model-endpoint tokens, record.
 */
export async function teardownInstance(payload: JobPayload<"teardown-instance">) {
  return teardown(payload.userId, payload.instanceId);
}
