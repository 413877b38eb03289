import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { logger } from "../../app/server/platform/logger.server.ts";

/**
 * Tears down a deleted user's agent instance.
 *
 * TODAY THIS REMOVES NOTHING: the agent runtime (containers, volumes, streams) does not exist
 * yet, so there is no instance to remove. The handler only records — in the job's output and
 * the log — that no instance was found. The agent-runtime issue replaces the body with the real
 * teardown (look up the user's instances, stop and remove each container and its volume,
 * idempotently). Nothing here claims a container was removed.
 */
export async function teardownInstance(payload: JobPayload<"teardown-instance">) {
  const result = {
    userId: payload.userId,
    instancesFound: 0,
    removed: 0,
    note: "no agent runtime yet: nothing to tear down",
  };
  logger().info(result, "teardown-instance: no instance recorded for this user");
  return result;
}
