import { channelSettings, channelsPatch } from "../../app/server/agents/channels.server.ts";
import { type InstanceRow, updateInstance } from "../../app/server/agents/instances.server.ts";
import { PROGRESS_STEPS, recordStep, setRunPath } from "../../app/server/agents/progress.server.ts";
import {
  handOverWarmupToken,
  revokeInstanceTokens,
} from "../../app/server/ai/instance-tokens.server.ts";
import type { GatewayClient } from "../../app/server/openclaw/client.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { recordAdoption, recordPoolMiss } from "../metrics.ts";
import { limitsForPlan } from "../runtime/index.ts";
import { log, removeGatewayNetwork, rt } from "./engine.ts";
import { applyPlatformConfig, PLATFORM_CONFIG_VERSION } from "./gateway-config.ts";
import { connectPooled, POOL_LIMITS, type PoolRow, poolNodes, sameLimits } from "./pool.ts";
import { poolSize } from "./pool-size.ts";
import { pinnedGatewayImage } from "./update-image-version.ts";
import { removeVolumeOrDefer } from "./volume-removals.ts";

// Adoption: a provisioning takes a ready pooled gateway over instead of starting one cold.

/**
 * Claims the oldest ready pooled gateway on the tag's current build (no two claim the same); on
 * a cluster, only one on a node that still takes new instances.
 */
async function claimReady(): Promise<PoolRow | undefined> {
  // Only a gateway on the current build of the tag (a rebuilt tag leaves older ones stale).
  const current = await rt().imageId(await pinnedGatewayImage());
  if (!current) return undefined;
  const nodes = await poolNodes();
  const [pooled] = await db()<PoolRow[]>`
    delete from gateway_pool where id = (
      select id from gateway_pool where state = 'ready' and image_id = ${current}
        and config_version = ${PLATFORM_CONFIG_VERSION}
        ${nodes ? db()`and node_id = any(${nodes}::text[])` : db()``}
      order by ready_at limit 1 for update skip locked)
    returning *`;
  return pooled;
}

/**
 * Makes a claimed gateway the tenant's. It carries nothing: no session may be there (the dry
 * run's was deleted; a heartbeat has no route in a pooled gateway), checked alongside the
 * patch, not after it. The warm-up token becomes the tenant's: the gateway keeps the provider it
 * warmed up with, and a config patch (a provider reload that costs the first reply seconds) is
 * needed only when the tenant's model or channels differ from the warm-up's.
 */
async function handOver(client: GatewayClient, pooled: PoolRow, row: InstanceRow) {
  const handedOver = await handOverWarmupToken(pooled.id, row.user_id, row.id);
  const defaults =
    handedOver &&
    (row.model ?? env().RUNTIME_DEFAULT_MODEL) === env().RUNTIME_DEFAULT_MODEL &&
    Object.keys(channelsPatch(await channelSettings(row.user_id))).length === 0;
  const [sessions] = await Promise.all([
    client.request<{ sessions?: Array<{ key: string }> }>("sessions.list", {}),
    defaults ? undefined : applyPlatformConfig(client, row),
  ]);
  if ((sessions.sessions ?? []).length > 0) {
    throw new Error(`the pooled gateway has sessions: ${sessions.sessions?.map((s) => s.key)}`);
  }
}

/**
 * Gives `row` a ready pooled gateway: claims one, hands its warm-up token over to the tenant
 * (patching the config only where the tenant's model or channels differ) and takes over its
 * container, volume, token and device. Returns undefined when the pool has none ready (or
 * adoption failed; the claimed gateway is then discarded and the caller provisions cold).
 */
export async function adoptFromPool(row: InstanceRow): Promise<InstanceRow | undefined> {
  if (poolSize() <= 0) return undefined;
  // A tenant on a larger plan gets its plan's limits: resized in place where the driver can,
  // else a cold start with them (never a pooled gateway's smaller ones).
  const limits = limitsForPlan(row.plan);
  const resize = !sameLimits(limits, POOL_LIMITS);
  if (resize && !rt().resize) {
    recordPoolMiss("resize");
    return undefined;
  }
  const pooled = await claimReady();
  if (!pooled) {
    recordPoolMiss("empty");
    return undefined;
  }
  try {
    const { info, address, client, hello } = await connectPooled(pooled);
    try {
      await handOver(client, pooled, row);
    } finally {
      client.close();
    }
    if (resize) await rt().resize?.(info.id, limits);
    const adopted = await updateInstance(row.id, {
      container_id: info.id,
      container_name: pooled.container_name,
      volume_name: pooled.volume_name,
      image: pooled.image,
      image_id: info.imageId,
      gateway_token_sealed: pooled.gateway_token_sealed,
      device_id: pooled.device_id,
      device_private_key_sealed: pooled.device_private_key_sealed,
      device_token_sealed: pooled.device_token_sealed,
      paired_at: new Date(),
      // Claimed only at the current version; a patch at hand-over records it too.
      platform_config_version: PLATFORM_CONFIG_VERSION,
      gateway_address: address,
      gateway_version: hello.server.version,
      started_at: info.startedAt ? new Date(info.startedAt) : null,
      observed_state: "running",
      health: "healthy",
      observed_at: new Date(),
      last_error: null,
    });
    // A pooled gateway was created, healthy, paired and warmed up before it was claimed.
    await setRunPath(row.id, "pool");
    for (const step of PROGRESS_STEPS) await recordStep(row.id, step);
    log().info({ instanceId: row.id, pooled: pooled.id }, "instance adopted a pooled gateway");
    recordAdoption();
    return adopted;
  } catch (error) {
    log().warn(
      { err: error, pooled: pooled.id },
      "adopting a pooled gateway failed; discarding it",
    );
    recordPoolMiss("failed");
    // Whoever holds the gateway's token now (pool or tenant), it goes with the gateway; a cold
    // provision issues the tenant a fresh one.
    await revokeInstanceTokens(pooled.id);
    await revokeInstanceTokens(row.id);
    await rt().remove(pooled.container_name);
    await removeVolumeOrDefer(pooled.volume_name);
    await removeGatewayNetwork(pooled.container_name);
    return undefined;
  }
}
