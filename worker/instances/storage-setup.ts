import { recordStorageEnforcement } from "../../app/server/agents/storage.server.ts";
import { storageBaseBytes } from "../../app/server/billing/storage-limit.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { logger } from "../../app/server/platform/logger.server.ts";
import { DockerRuntime } from "../runtime/docker.ts";
import { StorageQuota } from "../runtime/storage-quota.ts";
import type { AgentRuntime, StorageEnforcement } from "../runtime/types.ts";

// At worker start: gives the Docker driver the prepared storage root (STORAGE_ROOT) and says,
// in the log and for /ops, whether gateways are held to a hard storage limit and if not why
// (decision 0216): a host that cannot enforce one is never silent about it.

export async function prepareStorage(runtime: AgentRuntime): Promise<StorageEnforcement> {
  if (runtime instanceof DockerRuntime && !runtime.storageEnforcement().enforced) {
    const probed = await StorageQuota.probe(env().STORAGE_ROOT);
    runtime.configureStorage(
      "quota" in probed ? { ...probed, defaultLimitBytes: storageBaseBytes() } : probed,
    );
  }
  const state: StorageEnforcement = runtime.storageEnforcement?.() ?? {
    enforced: false,
    reason: `the ${runtime.driver} driver has no storage limits (decision 0216)`,
  };
  if (state.enforced) {
    logger().info("storage limits: enforced (%s)", state.mechanism);
  } else {
    logger().warn("storage limits: NOT enforced: %s", state.reason);
  }
  await recordStorageEnforcement(
    state.enforced,
    state.enforced ? state.mechanism : state.reason,
  ).catch((error: unknown) => logger().warn({ err: error }, "storage limits: not recorded"));
  return state;
}
