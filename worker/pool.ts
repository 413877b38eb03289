import { randomBytes } from "node:crypto";
import { channelSettings, channelsPatch } from "../app/server/agents/channels.server.ts";
import {
  type InstanceRow,
  newGatewayToken,
  updateInstance,
} from "../app/server/agents/instances.server.ts";
import {
  handOverWarmupToken,
  issueWarmupToken,
  revokeInstanceTokens,
} from "../app/server/ai/instance-tokens.server.ts";
import {
  deviceIdentityFromPrivateKey,
  generateDeviceIdentity,
} from "../app/server/openclaw/device-identity.server.ts";
import { seal, unseal } from "../app/server/platform/crypto.server.ts";
import { db } from "../app/server/platform/db.server.ts";
import { env } from "../app/server/platform/env.server.ts";
import {
  applyPlatformConfig,
  connectWithPairing,
  DEPLOYMENT_LABEL,
  deployment,
  GATEWAY_PORT,
  gatewayConfig,
  log,
  patchConfig,
  platformAiBaseUrl,
  rt,
  STATE_DIR,
  waitHealthy,
  writeConfigIfAbsent,
} from "./instances.ts";
import { gatewayEndpoint, limitsForPlan } from "./runtime/index.ts";
import { dryRunTurn, WARMUP_MESSAGE } from "./warm-up.ts";

// Warm pool (RUNTIME_POOL_SIZE, 0 = off): gateways started, healthy and paired before anyone
// asks, so provisioning only patches the tenant's config over the control protocol instead of
// waiting 15–30 s for a cold start. A pooled gateway has never served a tenant; once claimed it
// belongs to that instance for good (it never returns to the pool). Before it is ready it runs
// one dry-run chat turn (answered by the platform's endpoint for its warm-up token, decision
// 0038), so the tenant's first chat does not pay the gateway's first-run cost (~8–10 s).

export interface PoolRow {
  id: string;
  container_name: string;
  volume_name: string;
  container_id: string | null;
  image: string;
  /** The image id it runs (set once its container exists). */
  image_id: string | null;
  state: "starting" | "ready";
  gateway_token_sealed: string;
  device_id: string | null;
  device_private_key_sealed: string | null;
  device_token_sealed: string | null;
  gateway_address: string | null;
  gateway_version: string | null;
  ready_at: Date | null;
  state_since: Date;
}

/** A 'starting' row this old belongs to a filler that died (the fill-pool job expires at 15 min). */
const ORPHAN_AFTER_MINUTES = 20;

/**
 * Starts pooled gateways until RUNTIME_POOL_SIZE are ready or starting, after discarding the
 * gateways of fillers that died and the ready ones on an image other than the configured tag's
 * current build, and warming up again those ready for RUNTIME_POOL_REWARM_MINUTES.
 * `warmUpCycles` other than WARMUP_CYCLES: the benchmark's comparison only.
 */
export async function fillPool(
  options: { warmUpCycles?: number } = {},
): Promise<{ started: string[]; rewarmed: string[]; discarded: string[]; size: number }> {
  const size = env().RUNTIME_POOL_SIZE;
  const started: string[] = [];
  const orphans = await db()<{ id: string; container_name: string }[]>`
    select id, container_name from gateway_pool
    where state = 'starting' and state_since < now() - make_interval(mins => ${ORPHAN_AFTER_MINUTES})`;
  const current = await rt().imageId(env().AGENT_GATEWAY_IMAGE);
  const outdated = await db()<{ id: string; container_name: string }[]>`
    select id, container_name from gateway_pool
    where state = 'ready' and image_id is distinct from ${current ?? null}`;
  for (const row of [...orphans, ...outdated]) await discardPooled(row.id, row.container_name);
  const rewarmed = await rewarmStale();
  for (;;) {
    const [{ n } = { n: 0 }] = await db()<{ n: number }[]>`
      select count(*)::int as n from gateway_pool`;
    if (n >= size) break;
    started.push(await startPooledGateway(options.warmUpCycles ?? WARMUP_CYCLES));
  }
  const discarded = [...orphans, ...outdated].map((o) => o.id);
  return { started, rewarmed, discarded, size };
}

/**
 * Warms up again, one at a time, the pooled gateways that have been ready for
 * RUNTIME_POOL_REWARM_MINUTES: OpenClaw retires its idle SQLite workers and re-plans session
 * maintenance after 30 minutes, which a tenant's first turn would pay again (decision 0038).
 * A gateway being re-warmed is 'starting', so no provisioning adopts it meanwhile; one that
 * fails is discarded (the next fill replaces it).
 */
async function rewarmStale(): Promise<string[]> {
  const minutes = env().RUNTIME_POOL_REWARM_MINUTES;
  const rewarmed: string[] = [];
  if (minutes <= 0) return rewarmed;
  for (;;) {
    const [row] = await db()<PoolRow[]>`
      update gateway_pool set state = 'starting', state_since = now() where id = (
        select id from gateway_pool
        where state = 'ready' and state_since < now() - make_interval(mins => ${minutes})
        order by state_since limit 1 for update skip locked)
      returning *`;
    if (!row) return rewarmed;
    try {
      const { info, client } = await connectPooled(row);
      const { gatewayIp } = await rt().ensureNetwork(env().RUNTIME_NETWORK, {
        [DEPLOYMENT_LABEL]: deployment(),
      });
      try {
        const aiBaseUrl = await platformAiBaseUrl(gatewayIp);
        await warmUp(client, { id: row.id, containerId: info.id, aiBaseUrl });
      } finally {
        client.close();
      }
      await db()`update gateway_pool set state = 'ready', state_since = now(), ready_at = now()
        where id = ${row.id}`;
      rewarmed.push(row.id);
    } catch (error) {
      log().warn(
        { err: error, pooled: row.id },
        "re-warming a pooled gateway failed; discarding it",
      );
      await discardPooled(row.id, row.container_name);
    }
  }
}

async function startPooledGateway(cycles: number): Promise<string> {
  const id = `gwp_${randomBytes(9).toString("base64url").replace(/[-_]/g, "x").toLowerCase()}`;
  const name = `agent-${id}`;
  const image = env().AGENT_GATEWAY_IMAGE;
  const token = newGatewayToken();
  const device = generateDeviceIdentity();
  await db()`insert into gateway_pool (id, container_name, volume_name, image,
      gateway_token_sealed, device_id, device_private_key_sealed)
    values (${id}, ${name}, ${`${name}-state`}, ${image}, ${seal(token)}, ${device.deviceId},
      ${seal(device.privateKeyPem)})`;
  try {
    const labels = { [DEPLOYMENT_LABEL]: deployment(), "agent-platform.pool": "1" };
    const { gatewayIp } = await rt().ensureNetwork(env().RUNTIME_NETWORK, {
      [DEPLOYMENT_LABEL]: deployment(),
    });
    await rt().ensureVolume(`${name}-state`, labels);
    // Generic config: the platform provider without a tenant token (patched at adoption).
    await writeConfigIfAbsent(`${name}-state`, image, async () =>
      gatewayConfig({
        aiBaseUrl: await platformAiBaseUrl(gatewayIp),
        aiToken: "unassigned",
        model: env().RUNTIME_DEFAULT_MODEL,
        initial: true,
      }),
    );
    const containerId = await rt().create({
      instanceId: id,
      userId: "pool",
      image,
      name,
      hostname: name,
      volume: `${name}-state`,
      volumeTarget: STATE_DIR,
      network: env().RUNTIME_NETWORK,
      limits: limitsForPlan("solo"),
      env: { OPENCLAW_GATEWAY_TOKEN: token },
      labels,
      restartPolicy: "on-failure",
    });
    await rt().start(containerId);
    const info = await rt().inspect(containerId);
    if (!info) throw new Error("pooled container vanished");
    await db()`update gateway_pool set image_id = ${info.imageId} where id = ${id}`;
    await waitHealthy(info);
    const address = gatewayEndpoint(info, GATEWAY_PORT) as string;
    const { client, hello } = await connectWithPairing({
      container: containerId,
      address,
      token,
      device,
    });
    try {
      if (cycles > 0) {
        const aiBaseUrl = await platformAiBaseUrl(gatewayIp);
        await warmUp(client, { id, containerId, aiBaseUrl }, cycles);
      }
    } finally {
      client.close();
    }
    await db()`update gateway_pool set state = 'ready', container_id = ${containerId},
        gateway_address = ${address}, gateway_version = ${hello.server.version},
        device_token_sealed = ${hello.auth?.deviceToken ? seal(hello.auth.deviceToken) : null},
        ready_at = now(), state_since = now()
      where id = ${id}`;
    return id;
  } catch (error) {
    await discardPooled(id, name);
    throw error;
  }
}

/**
 * Dry-run cycles per pooled gateway. One takes the tenant's first reply (provision start →
 * reply) from 21–44 s to 1.4–2.2 s at 1 CPU; a second measured no better (decision 0038).
 */
export const WARMUP_CYCLES = 1;

/**
 * The dry-run cycles of a pooled gateway, each as an adoption and a first chat do it: a config
 * patch pointing the provider at the platform's endpoint with a fresh warm-up token of this
 * gateway, then one dry-run turn (warm-up.ts). Afterwards the gateway must list no session at
 * all. Throws otherwise (the caller discards the gateway).
 */
export async function warmUp(
  client: Awaited<ReturnType<typeof connectWithPairing>>["client"],
  pooled: { id: string; containerId: string; aiBaseUrl: string },
  cycles = WARMUP_CYCLES,
): Promise<{ ms: number; attempts: number }> {
  const t0 = Date.now();
  let attempts = 0;
  for (let cycle = 0; cycle < cycles; cycle++) {
    await revokeInstanceTokens(pooled.id);
    await patchConfig(
      client,
      gatewayConfig({
        aiBaseUrl: pooled.aiBaseUrl,
        aiToken: await issueWarmupToken(pooled.id),
        model: env().RUNTIME_DEFAULT_MODEL,
      }),
    );
    attempts += await dryRunTurn(client, pooled.containerId, WARMUP_MESSAGE, {
      pooled: pooled.id,
    });
  }
  const left = await client.request<{ sessions?: Array<{ key: string }> }>(
    "sessions.list",
    {},
    { timeoutMs: 60_000 },
  );
  if ((left.sessions ?? []).length > 0) {
    throw new Error(`warm-up left sessions behind: ${left.sessions?.map((s) => s.key).join(", ")}`);
  }
  const ms = Date.now() - t0;
  log().info({ pooled: pooled.id, ms, attempts }, "pooled gateway warmed up");
  return { ms, attempts };
}

async function discardPooled(id: string, name: string): Promise<void> {
  await revokeInstanceTokens(id);
  await rt().remove(name);
  await rt().removeVolume(`${name}-state`);
  await db()`delete from gateway_pool where id = ${id}`;
}

/** A paired control connection to a running pooled gateway (throws when it is not running). */
async function connectPooled(row: PoolRow) {
  const info = await rt().inspect(row.container_name);
  if (!info?.running || !info.address) throw new Error("pooled gateway is not running");
  const address = gatewayEndpoint(info, GATEWAY_PORT) as string;
  const { client, hello } = await connectWithPairing({
    container: info.id,
    address,
    token: unseal(row.gateway_token_sealed),
    device: deviceIdentityFromPrivateKey(unseal(row.device_private_key_sealed as string)),
  });
  return { info, address, client, hello };
}

/**
 * Gives `row` a ready pooled gateway: claims one (no two provisionings get the same), hands its
 * warm-up token over to the tenant (patching the config only where the tenant's model or
 * channels differ) and takes over its container, volume, token and device. Returns undefined when the pool has none ready (or adoption failed; the
 * claimed gateway is then discarded and the caller provisions cold).
 */
export async function adoptFromPool(row: InstanceRow): Promise<InstanceRow | undefined> {
  if (env().RUNTIME_POOL_SIZE <= 0) return undefined;
  // Only a gateway on the current build of the tag (a rebuilt tag leaves older ones stale).
  const current = await rt().imageId(env().AGENT_GATEWAY_IMAGE);
  if (!current) return undefined;
  const [pooled] = await db()<PoolRow[]>`
    delete from gateway_pool where id = (
      select id from gateway_pool where state = 'ready' and image_id = ${current}
      order by ready_at limit 1 for update skip locked)
    returning *`;
  if (!pooled) return undefined;
  try {
    const { info, address, client, hello } = await connectPooled(pooled);
    try {
      // Carries nothing: no session may be there (the dry run's was deleted; a heartbeat has
      // no route in a pooled gateway). Checked alongside the patch, not after it.
      // The warm-up token becomes the tenant's: the gateway keeps the provider it warmed up
      // with, and a config patch (a provider reload that costs the first reply seconds) is
      // needed only when the tenant's model or channels differ from the warm-up's.
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
    } finally {
      client.close();
    }
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
      gateway_address: address,
      gateway_version: hello.server.version,
      started_at: info.startedAt ? new Date(info.startedAt) : null,
      observed_state: "running",
      health: "healthy",
      observed_at: new Date(),
      last_error: null,
    });
    log().info({ instanceId: row.id, pooled: pooled.id }, "instance adopted a pooled gateway");
    return adopted;
  } catch (error) {
    log().warn(
      { err: error, pooled: pooled.id },
      "adopting a pooled gateway failed; discarding it",
    );
    // Whoever holds the gateway's token now (pool or tenant), it goes with the gateway; a cold
    // provision issues the tenant a fresh one.
    await revokeInstanceTokens(pooled.id);
    await revokeInstanceTokens(row.id);
    await rt().remove(pooled.container_name);
    await rt().removeVolume(pooled.volume_name);
    return undefined;
  }
}

/** Container names of pooled gateways (reconcile must not take them for orphans). */
export async function pooledContainerNames(): Promise<Set<string>> {
  const rows = await db()<{ container_name: string }[]>`select container_name from gateway_pool`;
  return new Set(rows.map((r) => r.container_name));
}
