import { randomBytes } from "node:crypto";
import { newGatewayToken } from "../../app/server/agents/instances.server.ts";
import {
  issueWarmupToken,
  revokeInstanceTokens,
} from "../../app/server/ai/instance-tokens.server.ts";
import type { GatewayClient } from "../../app/server/openclaw/client.server.ts";
import { generateDeviceIdentity } from "../../app/server/openclaw/device-identity.server.ts";
import { seal } from "../../app/server/platform/crypto.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { NoCapacityError } from "../runtime/index.ts";
import { gatewayRestartPolicy } from "./container.ts";
import {
  deploymentLabels,
  ensureGatewayNetwork,
  ensureNetwork,
  gatewayAddress,
  log,
  rt,
  STATE_DIR,
} from "./engine.ts";
import { withFillSlot } from "./fill-slot.ts";
import {
  gatewayConfig,
  PLATFORM_CONFIG_VERSION,
  patchConfig,
  platformAiBaseUrl,
  writeConfigIfAbsent,
} from "./gateway-config.ts";
import { waitHealthy } from "./health.ts";
import { memoryIsTight } from "./memory-pressure.ts";
import { connectWithPairing } from "./pairing.ts";
import { connectPooled, discardPooled, POOL_LIMITS, type PoolRow, poolNodes } from "./pool.ts";
import { discardDeadFills, fillOwner } from "./pool-dead-fills.ts";
import { poolSize } from "./pool-size.ts";
import { pinnedGatewayImage } from "./update-image-version.ts";
import { dryRunTurn, WARMUP_MESSAGE } from "./warm-up.ts";

// Filling the warm pool: pooled gateways started, paired and warmed up (pool.ts).

/**
 * A 'starting' row this old belongs to a filler that died (the fill-pool job expires at 15 min):
 * the backstop for rows no job attempt is recorded on; the others go as soon as their attempt is
 * over (pool-dead-fills.ts).
 */
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
  // A host short of memory gives up its warm gateways before sleepers are pushed from the
  // compressed pool to disk (decision 0222): none is kept, the ready ones go.
  const tight = await memoryIsTight();
  const size = tight ? 0 : poolSize();
  const started: string[] = [];
  const deadFills = await discardDeadFills();
  const orphans = await db()<{ id: string; container_name: string }[]>`
    select id, container_name from gateway_pool
    where state = 'starting' and state_since < now() - make_interval(mins => ${ORPHAN_AFTER_MINUTES})`;
  const current = await rt().imageId(await pinnedGatewayImage());
  const outdated = await db()<{ id: string; container_name: string }[]>`
    select id, container_name from gateway_pool
    where state = 'ready' and (image_id is distinct from ${current ?? null}
      or config_version is distinct from ${PLATFORM_CONFIG_VERSION})`;
  // On a cluster, the ready ones on a node that takes no new instance any more (drained,
  // paused, down): never adopted there, so they only hold the node's memory.
  const nodes = await poolNodes();
  // (On one host, those a cluster driver left: their node is nowhere this driver reaches.)
  const offNodes = await db()<{ id: string; container_name: string }[]>`
    select id, container_name from gateway_pool where state = 'ready' and ${
      nodes
        ? db()`(node_id is null or not (node_id = any(${nodes}::text[])))`
        : db()`node_id is not null`
    }`;
  const surplus = tight
    ? await db()<{ id: string; container_name: string }[]>`
        select id, container_name from gateway_pool where state = 'ready'`
    : [];
  const gone = [...orphans, ...outdated, ...offNodes, ...surplus];
  for (const row of gone) await discardPooled(row.id, row.container_name);
  const rewarmed = await rewarmStale();
  // Nodes fill side by side (each boots on its own CPUs), one gateway at a time on each.
  const fills = await Promise.allSettled(
    (nodes ?? [null]).map(async (node) => {
      for (;;) {
        const [{ n } = { n: 0 }] = await db()<{ n: number }[]>`
          select count(*)::int as n from gateway_pool where node_id is not distinct from ${node}`;
        if (n >= size) return;
        try {
          started.push(await startPooledGateway(options.warmUpCycles ?? WARMUP_CYCLES, node));
        } catch (error) {
          // A full node keeps a smaller pool (or none); the other nodes still get theirs.
          if (!(error instanceof NoCapacityError)) throw error;
          log().info({ node, err: error }, "warm pool: no room for a pooled gateway on the node");
          return;
        }
      }
    }),
  );
  const failed = fills.find((f): f is PromiseRejectedResult => f.status === "rejected");
  if (failed) throw failed.reason;
  const discarded = [...new Set([...deadFills, ...gone.map((o) => o.id)])];
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
  const owner = fillOwner();
  for (;;) {
    const [row] = await db()<PoolRow[]>`
      update gateway_pool set state = 'starting', state_since = now(),
        fill_job = ${owner.fill_job}, fill_job_id = ${owner.fill_job_id},
        fill_job_attempt = ${owner.fill_job_attempt}
      where id = (
        select id from gateway_pool
        where state = 'ready' and state_since < now() - make_interval(mins => ${minutes})
        order by state_since limit 1 for update skip locked)
      returning *`;
    if (!row) return rewarmed;
    try {
      const { info, client } = await connectPooled(row);
      const { gatewayIp } = await ensureNetwork();
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

/** A new pool row ('starting') with its name, token and device identity, on `node` if any. */
async function insertPooled(node: string | null) {
  const id = `gwp_${randomBytes(9).toString("base64url").replace(/[-_]/g, "x").toLowerCase()}`;
  const pooled = {
    id,
    name: `agent-${id}`,
    volume: `agent-${id}-state`,
    image: await pinnedGatewayImage(),
    token: newGatewayToken(),
    device: generateDeviceIdentity(),
  };
  const owner = fillOwner();
  await db()`insert into gateway_pool (id, container_name, volume_name, image,
      gateway_token_sealed, device_id, device_private_key_sealed, config_version, node_id,
      fill_job, fill_job_id, fill_job_attempt)
    values (${id}, ${pooled.name}, ${pooled.volume}, ${pooled.image}, ${seal(pooled.token)},
      ${pooled.device.deviceId}, ${seal(pooled.device.privateKeyPem)}, ${PLATFORM_CONFIG_VERSION},
      ${node}, ${owner.fill_job}, ${owner.fill_job_id}, ${owner.fill_job_attempt})`;
  return { ...pooled, node };
}

/** Volume, generic config and container of a pooled gateway, started and healthy; its inspect. */
async function createPooledContainer(
  pooled: Awaited<ReturnType<typeof insertPooled>>,
  gatewayIp: string | undefined,
) {
  const labels = { ...deploymentLabels(), "agent-platform.pool": "1" };
  await rt().ensureVolume(pooled.volume, labels, {
    limits: POOL_LIMITS,
    ...(pooled.node ? { node: pooled.node } : {}),
  });
  // Generic config: the platform provider without a tenant token (patched at adoption).
  await writeConfigIfAbsent(pooled.volume, pooled.image, async () =>
    gatewayConfig({
      aiBaseUrl: await platformAiBaseUrl(gatewayIp),
      aiToken: "unassigned",
      model: env().RUNTIME_DEFAULT_MODEL,
      initial: true,
      controlUiRoot: await rt().controlUiRoot(pooled.image),
    }),
  );
  const network = await ensureGatewayNetwork(pooled.name, pooled.id);
  const containerId = await rt().create({
    instanceId: pooled.id,
    userId: "pool",
    image: pooled.image,
    name: pooled.name,
    hostname: pooled.name,
    volume: pooled.volume,
    volumeTarget: STATE_DIR,
    network,
    limits: POOL_LIMITS,
    env: { OPENCLAW_GATEWAY_TOKEN: pooled.token },
    labels,
    // As a tenant's (0241): a crashed pooled gateway is discarded at its adoption or re-warm.
    restartPolicy: gatewayRestartPolicy(),
  });
  // Its boot, from the start until /healthz answers, in one of the node's slots (0241).
  return withFillSlot(pooled.node ?? "host", async () => {
    await rt().start(containerId);
    const info = await rt().inspect(containerId);
    if (!info) throw new Error("pooled container vanished");
    await db()`update gateway_pool set image_id = ${info.imageId} where id = ${pooled.id}`;
    await waitHealthy(info);
    return info;
  });
}

/** Starts one pooled gateway, pairs and warms it up, and marks it ready (discarded on failure). */
async function startPooledGateway(cycles: number, node: string | null): Promise<string> {
  const pooled = await insertPooled(node);
  try {
    const { gatewayIp } = await ensureNetwork();
    const info = await createPooledContainer(pooled, gatewayIp);
    const address = gatewayAddress(info) as string;
    const { client, hello } = await connectWithPairing({
      container: info.id,
      address,
      token: pooled.token,
      device: pooled.device,
    });
    try {
      if (cycles > 0) {
        const aiBaseUrl = await platformAiBaseUrl(gatewayIp);
        await warmUp(client, { id: pooled.id, containerId: info.id, aiBaseUrl }, cycles);
      }
    } finally {
      client.close();
    }
    await db()`update gateway_pool set state = 'ready', container_id = ${info.id},
        gateway_address = ${address}, gateway_version = ${hello.server.version},
        device_token_sealed = ${hello.auth?.deviceToken ? seal(hello.auth.deviceToken) : null},
        ready_at = now(), state_since = now()
      where id = ${pooled.id}`;
    return pooled.id;
  } catch (error) {
    await discardPooled(pooled.id, pooled.name);
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
  client: GatewayClient,
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
