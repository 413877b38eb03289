import { revokeInstanceTokens } from "../../app/server/ai/instance-tokens.server.ts";
import { deviceIdentityFromPrivateKey } from "../../app/server/openclaw/device-identity.server.ts";
import { unseal } from "../../app/server/platform/crypto.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { isClusterRuntime, limitsForPlan, type ResourceLimits } from "../runtime/index.ts";
import { gatewayAddress, removeGatewayNetwork, rt } from "./engine.ts";
import { connectWithPairing } from "./pairing.ts";
import { removeVolumeOrDefer } from "./volume-removals.ts";

// Warm pool (RUNTIME_POOL_SIZE, 0 = off): gateways started, healthy and paired before anyone
// asks, so provisioning only patches the tenant's config over the control protocol instead of
// waiting 15–30 s for a cold start. A pooled gateway has never served a tenant; once claimed it
// belongs to that instance for good (it never returns to the pool). Before it is ready it runs
// one dry-run chat turn (answered by the platform's endpoint for its warm-up token, decision
// 0038), so the tenant's first chat does not pay the gateway's first-run cost (~8–10 s).

/** What a pooled gateway is created with: the smallest plan's; adoption resizes to the tenant's. */
export const POOL_LIMITS = limitsForPlan("solo");

/** True when a gateway created with `a` serves a tenant whose plan sets `b` as it is. */
export const sameLimits = (a: ResourceLimits, b: ResourceLimits) =>
  a.memoryBytes === b.memoryBytes &&
  a.cpuShares === b.cpuShares &&
  a.cpus === b.cpus &&
  a.pidsLimit === b.pidsLimit;

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
  /** PLATFORM_CONFIG_VERSION of its generic config. */
  config_version: number | null;
  /** The node it runs on (multi-node drivers), else null. */
  node_id: string | null;
  ready_at: Date | null;
  state_since: Date;
  /** The fill-pool job attempt starting or re-warming it (null when not started by a job). */
  fill_job: string | null;
  fill_job_id: string | null;
  fill_job_attempt: number | null;
}

/**
 * The nodes the pool is kept on: every node that takes new instances (ready, not paused,
 * drained or draining) on a multi-node driver, each with RUNTIME_POOL_SIZE of its own, so a
 * provisioning finds a warm gateway wherever it may go (decision 0181). Undefined on a one-host
 * driver: one pool of RUNTIME_POOL_SIZE.
 */
export async function poolNodes(): Promise<string[] | undefined> {
  const runtime = rt();
  if (!isClusterRuntime(runtime)) return undefined;
  return (await runtime.nodes())
    .filter((n) => n.state === "ready" && n.availability === "active")
    .map((n) => n.id);
}

/** Removes a pooled gateway: its tokens, container, volume and row. */
export async function discardPooled(id: string, name: string): Promise<void> {
  await revokeInstanceTokens(id);
  await rt().remove(name);
  await removeVolumeOrDefer(`${name}-state`);
  await removeGatewayNetwork(name);
  await db()`delete from gateway_pool where id = ${id}`;
}

/** A paired control connection to a running pooled gateway (throws when it is not running). */
export async function connectPooled(row: PoolRow) {
  const info = await rt().inspect(row.container_name);
  if (!info?.running || !info.address) throw new Error("pooled gateway is not running");
  const address = gatewayAddress(info) as string;
  const { client, hello } = await connectWithPairing({
    container: info.id,
    address,
    token: unseal(row.gateway_token_sealed),
    device: deviceIdentityFromPrivateKey(unseal(row.device_private_key_sealed as string)),
  });
  return { info, address, client, hello };
}

/** Container names of pooled gateways (reconcile must not take them for orphans). */
export async function pooledContainerNames(): Promise<Set<string>> {
  const rows = await db()<{ container_name: string }[]>`select container_name from gateway_pool`;
  return new Set(rows.map((r) => r.container_name));
}
