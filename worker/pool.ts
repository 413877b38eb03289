import { randomBytes } from "node:crypto";
import {
  deviceIdentityFromPrivateKey,
  generateDeviceIdentity,
} from "../app/server/agents/gateway-client.server.ts";
import {
  type InstanceRow,
  newGatewayToken,
  updateInstance,
} from "../app/server/agents/instances.server.ts";
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
  platformAiBaseUrl,
  rt,
  STATE_DIR,
  waitHealthy,
  writeConfigIfAbsent,
} from "./instances.ts";
import { gatewayEndpoint, limitsForPlan } from "./runtime/index.ts";

// Warm pool (RUNTIME_POOL_SIZE, 0 = off): gateways started, healthy and paired before anyone
// asks, so provisioning only patches the tenant's config over the control protocol instead of
// waiting 15–30 s for a cold start. A pooled gateway has never served a tenant; once claimed it
// belongs to that instance for good (it never returns to the pool).

export interface PoolRow {
  id: string;
  container_name: string;
  volume_name: string;
  container_id: string | null;
  image: string;
  state: "starting" | "ready";
  gateway_token_sealed: string;
  device_id: string | null;
  device_private_key_sealed: string | null;
  device_token_sealed: string | null;
  gateway_address: string | null;
  gateway_version: string | null;
}

/** Starts pooled gateways until RUNTIME_POOL_SIZE are ready or starting. Returns how many. */
export async function fillPool(): Promise<{ started: string[]; size: number }> {
  const size = env().RUNTIME_POOL_SIZE;
  const started: string[] = [];
  for (;;) {
    const [{ n } = { n: 0 }] = await db()<{ n: number }[]>`
      select count(*)::int as n from gateway_pool`;
    if (n >= size) break;
    started.push(await startPooledGateway());
  }
  return { started, size };
}

async function startPooledGateway(): Promise<string> {
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
    await waitHealthy(info);
    const address = gatewayEndpoint(info, GATEWAY_PORT) as string;
    const { client, hello } = await connectWithPairing({
      container: containerId,
      address,
      token,
      device,
    });
    client.close();
    await db()`update gateway_pool set state = 'ready', container_id = ${containerId},
        gateway_address = ${address}, gateway_version = ${hello.server.version},
        device_token_sealed = ${hello.auth?.deviceToken ? seal(hello.auth.deviceToken) : null},
        ready_at = now()
      where id = ${id}`;
    return id;
  } catch (error) {
    await discardPooled(id, name);
    throw error;
  }
}

async function discardPooled(id: string, name: string): Promise<void> {
  await rt().remove(name);
  await rt().removeVolume(`${name}-state`);
  await db()`delete from gateway_pool where id = ${id}`;
}

/**
 * Gives `row` a ready pooled gateway: claims one (no two provisionings get the same), patches
 * its config for the tenant (provider token, model) and takes over its container, volume,
 * token and device. Returns undefined when the pool has none ready (or adoption failed; the
 * claimed gateway is then discarded and the caller provisions cold).
 */
export async function adoptFromPool(row: InstanceRow): Promise<InstanceRow | undefined> {
  if (env().RUNTIME_POOL_SIZE <= 0) return undefined;
  const [pooled] = await db()<PoolRow[]>`
    delete from gateway_pool where id = (
      select id from gateway_pool where state = 'ready' and image = ${env().AGENT_GATEWAY_IMAGE}
      order by ready_at limit 1 for update skip locked)
    returning *`;
  if (!pooled) return undefined;
  try {
    const info = await rt().inspect(pooled.container_name);
    if (!info?.running || !info.address) throw new Error("pooled gateway is not running");
    const address = gatewayEndpoint(info, GATEWAY_PORT) as string;
    const device = deviceIdentityFromPrivateKey(unseal(pooled.device_private_key_sealed as string));
    const { client, hello } = await connectWithPairing({
      container: info.id,
      address,
      token: unseal(pooled.gateway_token_sealed),
      device,
    });
    try {
      await applyPlatformConfig(client, row);
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
