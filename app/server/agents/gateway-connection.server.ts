import { setTimeout as delay } from "node:timers/promises";
import { unseal } from "../platform/crypto.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import {
  deviceIdentityFromPrivateKey,
  GatewayClient,
  GatewayRequestError,
  GatewayUnavailableError,
} from "./gateway-client.server.ts";
import { gatewayTokenOf, getInstanceByUser, type InstanceRow } from "./instances.server.ts";

// The web's connections to users' gateways, over the control protocol only (never Docker):
// one long-lived client per instance, reused across requests, opened with the platform's
// device identity that the worker paired at provisioning. A new address or device token (the
// container was recreated) replaces the client.

interface Cached {
  key: string;
  client: GatewayClient;
}

const clients = new Map<string, Cached>();

const unavailable = (detail: string) =>
  new DomainError(502, `Agent gateway unavailable: ${detail}`);

function keyOf(row: InstanceRow): string {
  return `${row.gateway_address}|${row.device_id}|${row.device_token_sealed ?? ""}`;
}

/**
 * How long a request waits for a gateway that answers "starting, retry shortly": after a start
 * or restart the gateway's /healthz answers seconds before it takes control connections, and
 * the lifecycle answers `running` at once. A chat sent then waits instead of failing with 502.
 */
const STARTUP_WAIT_MS = 30_000;

/** A connected client of the instance's gateway; 502 when it is not running or not paired. */
export async function gatewayClientFor(row: InstanceRow): Promise<GatewayClient> {
  if (!row.gateway_address || !row.device_private_key_sealed || !row.paired_at) {
    throw unavailable("the instance is not provisioned yet");
  }
  const deadline = Date.now() + STARTUP_WAIT_MS;
  for (;;) {
    try {
      return await connectCached(row, row.device_private_key_sealed);
    } catch (error) {
      const wait =
        error instanceof GatewayRequestError && error.retryAfterMs !== undefined
          ? Math.min(Math.max(error.retryAfterMs, 100), 5_000)
          : undefined;
      if (wait === undefined || Date.now() + wait > deadline) throw toDomainError(error);
      await delay(wait);
    }
  }
}

async function connectCached(row: InstanceRow, sealedDeviceKey: string): Promise<GatewayClient> {
  const key = keyOf(row);
  let cached = clients.get(row.id);
  if (cached && cached.key !== key) {
    cached.client.close();
    clients.delete(row.id);
    cached = undefined;
  }
  if (!cached) {
    const client = new GatewayClient({
      url: `ws://${row.gateway_address}`,
      token: gatewayTokenOf(row),
      device: deviceIdentityFromPrivateKey(unseal(sealedDeviceKey)),
      connectTimeoutMs: 5_000,
      requestTimeoutMs: 30_000,
      reconnect: true,
    });
    cached = { key, client };
    clients.set(row.id, cached);
  }
  try {
    await cached.client.connect();
  } catch (error) {
    cached.client.close();
    clients.delete(row.id);
    throw error;
  }
  return cached.client;
}

/** Maps the gateway client's failures to the API's: unreachable → 502; refused → 502 too. */
export function toDomainError(error: unknown): Error {
  if (error instanceof DomainError) return error;
  if (error instanceof GatewayUnavailableError) return unavailable(error.message);
  if (error instanceof GatewayRequestError) {
    return new DomainError(502, `Agent gateway error: ${error.message}`);
  }
  return error as Error;
}

/**
 * Runs `fn` with the user's instance and a connected client; 404 when the user has no instance,
 * 502 when its gateway does not answer.
 */
export async function withGateway<T>(
  userId: string,
  fn: (client: GatewayClient, instance: InstanceRow) => Promise<T>,
): Promise<T> {
  const instance = await getInstanceByUser(userId);
  if (!instance) throw new DomainError(404, "No agent instance: provision an agent first");
  const client = await gatewayClientFor(instance);
  try {
    return await fn(client, instance);
  } catch (error) {
    throw toDomainError(error);
  }
}

/** Closes every cached client (tests, shutdown). */
export function closeGatewayClients(): void {
  for (const { client } of clients.values()) client.close();
  clients.clear();
}
