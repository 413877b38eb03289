import { applyChannels, channelSettings } from "../../app/server/agents/channels.server.ts";
import {
  getInstance,
  type InstanceRow,
  recordError,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { sendJob } from "../../app/server/platform/jobs.server.ts";
import type { ContainerInfo } from "../runtime/index.ts";
import { waitForRoomToStart } from "./admission.ts";
import { ensureContainer } from "./container.ts";
import { gatewayAddress } from "./engine.ts";
import { waitHealthy } from "./health.ts";
import { removeInstanceLeftovers } from "./leftovers.ts";
import { withInstanceLock } from "./lock.ts";
import { connectPaired } from "./pairing.ts";
import { adoptFromPool } from "./pool-adopt.ts";
import { type RunProgress, startRun } from "./run-progress.ts";
import { withUserBootSlot } from "./user-boot.ts";
import { warmUpTenant } from "./warm-up.ts";

// provision-instance: a ready pooled gateway when there is one, else volume, config,
// container, healthy, pairing (and the first dry run). Idempotent.

/**
 * Over a first paired connection: the channels the user provisioned before the container
 * existed (POST /api/provision) and, for a gateway paired just now, its dry run.
 */
async function pairAndPrepare(row: InstanceRow, info: ContainerInfo, run: RunProgress) {
  // A gateway paired now is new (a retried or repeated provisioning finds it paired).
  const fresh = !row.paired_at;
  const { client, hello, row: paired } = await connectPaired(row, gatewayAddress(info) as string);
  await run.step("paired");
  try {
    await client.request("health");
    const channels = await channelSettings(paired.user_id);
    if (Object.keys(channels).length > 0) await applyChannels(client, channels);
    if (fresh && env().RUNTIME_COLD_WARMUP === "on") {
      await warmUpTenant(client, paired, info.id);
      await run.step("warmed-up");
    }
  } finally {
    client.close();
  }
  await updateInstance(paired.id, {
    observed_state: "running",
    health: "healthy",
    observed_at: new Date(),
    crash_restarts: 0,
    last_error: null,
  });
  await run.step("ready");
  return hello;
}

/** A cold start: the container created and started, healthy, paired and prepared. */
async function provisionCold(
  instanceId: string,
  row: InstanceRow,
  t0: number,
  run: RunProgress,
  signal?: AbortSignal,
) {
  try {
    await run.path("cold");
    // A new gateway waits its turn and for room (decision 0231); a retry whose container was
    // created already has its memory counted on the host.
    if (!row.container_id) await waitForRoomToStart(row, signal);
    // The boot in one of the node's slots (decision 0241), the lock held meanwhile: the
    // provision is one operation of the instance (node-slots.ts's lock order allows it).
    const info = await withUserBootSlot(
      instanceId,
      async () => {
        const started = await ensureContainer(row);
        await run.step("container-created");
        await waitHealthy(started);
        return started;
      },
      { signal },
    );
    await run.step("gateway-healthy");
    const healthyMs = Date.now() - t0;
    const hello = await pairAndPrepare((await getInstance(instanceId)) as InstanceRow, info, run);
    return { instanceId, healthyMs, readyMs: Date.now() - t0, version: hello.server.version };
  } catch (error) {
    await run.fail();
    await recordError(instanceId, `provision: ${(error as Error).message}`, {
      observed_state: "error",
    });
    throw error;
  }
}

/** provision-instance: volume, config, container, pairing, healthy. Idempotent. */
export async function provision(instanceId: string, signal?: AbortSignal) {
  return withInstanceLock(instanceId, async () => {
    const row = await getInstance(instanceId);
    if (!row) return { skipped: "no such instance" };
    const t0 = Date.now();
    // A worker that died in an earlier attempt may have left a one-shot holding the volume.
    await removeInstanceLeftovers(row.id);
    await updateInstance(row.id, { observed_state: "provisioning", desired_state: "running" });
    const run = await startRun(row.id, "provision");
    const adopted = row.container_id ? undefined : await adoptFromPool(row);
    if (!adopted) return provisionCold(instanceId, row, t0, run, signal);
    await sendJob("fill-pool", {}).catch(() => {}); // refill in the background
    return {
      instanceId,
      adopted: adopted.container_name,
      healthyMs: Date.now() - t0,
      readyMs: Date.now() - t0,
      version: adopted.gateway_version,
    };
  });
}
