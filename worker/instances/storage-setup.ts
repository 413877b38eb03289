import { recordStorageEnforcement } from "../../app/server/agents/storage.server.ts";
import { storageBaseBytes } from "../../app/server/billing/storage-limit.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { logger } from "../../app/server/platform/logger.server.ts";
import { DockerRuntime } from "../runtime/docker.ts";
import { StorageQuota } from "../runtime/storage-quota.ts";
import { SwarmRuntime } from "../runtime/swarm.ts";
import type { AgentRuntime, StorageEnforcement } from "../runtime/types.ts";
import { restoreStorageCounts } from "./storage-limits.ts";

// At worker start: gives the Docker or Swarm driver the prepared storage root (STORAGE_ROOT; on
// a swarm, per node, decision 0228) and says, in the log and for /ops, whether gateways are held
// to a hard storage limit and if not why (decision 0216): a host that cannot enforce one is
// never silent about it.

export async function prepareStorage(runtime: AgentRuntime): Promise<StorageEnforcement> {
  if (runtime instanceof DockerRuntime && !runtime.storageEnforcement().enforced) {
    const probed = await StorageQuota.probe(env().STORAGE_ROOT);
    runtime.configureStorage(
      "quota" in probed ? { ...probed, defaultLimitBytes: storageBaseBytes() } : probed,
    );
  }
  const { STORAGE_ROOT, AGENT_GATEWAY_IMAGE } = env();
  if (runtime instanceof SwarmRuntime && STORAGE_ROOT && !runtime.storageEnforcement().enforced) {
    // Each node's host probed through its engine (decision 0228); the nodes' storage agent only
    // sleeps in the gateway image, which every node holds.
    let started = false;
    await runtime.configureStorage({
      root: STORAGE_ROOT,
      image: AGENT_GATEWAY_IMAGE,
      defaultLimitBytes: storageBaseBytes(),
      // A node probed later (it joined after the start) is on /ops at once; the start's own
      // probes are recorded once below, whole (a partial one must not land last).
      onProbe: (state) => {
        if (started) void record(state);
      },
    });
    started = true;
  }
  const state: StorageEnforcement = runtime.storageEnforcement?.() ?? {
    enforced: false,
    reason: `the ${runtime.driver} driver has no storage limits (decision 0216)`,
  };
  if (state.enforced) {
    logger().info("storage limits: enforced (%s)", state.mechanism);
    // Counts a crash or an earlier run left inconsistent hold no limit until a rescan (0243).
    await restoreStorageCounts(runtime).catch((error: unknown) =>
      logger().warn({ err: error }, "storage: the counts' check failed"),
    );
  } else {
    logger().warn("storage limits: NOT enforced: %s", state.reason);
  }
  await record(state);
  return state;
}

function record(state: StorageEnforcement): Promise<void> {
  return recordStorageEnforcement(
    state.enforced,
    state.enforced ? state.mechanism : state.reason,
  ).catch((error: unknown) => logger().warn({ err: error }, "storage limits: not recorded"));
}
