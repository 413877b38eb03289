import { setTimeout as delay } from "node:timers/promises";
import { DomainError } from "../platform/errors.server.ts";
import { GatewayClient } from "./client.server.ts";
import { deviceIdentityFromPrivateKey } from "./device-identity.server.ts";
import {
  GatewayConnectError,
  GatewayRequestError,
  GatewayUnavailableError,
} from "./errors.server.ts";

// The web's connections to users' gateways, over the control protocol only (never Docker):
// one long-lived client per gateway, reused across requests, opened with the platform's device
// identity that the worker paired at provisioning. A new address or device key (the container
// was recreated) replaces the client.

/** Where a gateway answers and how the platform signs in to it. */
export interface GatewayEndpoint {
  /** Stable id of the gateway (its instance's id): one cached client each. */
  id: string;
  /** host:port of the gateway. */
  address: string;
  /** Changes whenever the pairing does (device id and device token): replaces the client. */
  pairing: string;
  /** The gateway's token and the platform's paired device key (PEM), read only to connect. */
  credentials(): { token: string; devicePrivateKeyPem: string };
}

interface Cached {
  key: string;
  address: string;
  client: GatewayClient;
}

const clients = new Map<string, Cached>();

export const gatewayUnavailable = (detail: string) =>
  new DomainError(502, `Agent gateway unavailable: ${detail}`);

/**
 * How long a request waits for a gateway that answers "starting, retry shortly": after a start
 * or restart the gateway's /healthz answers seconds before it takes control connections, and
 * the lifecycle answers `running` at once. A chat sent then waits instead of failing with 502.
 */
const STARTUP_WAIT_MS = 30_000;

/** Waits between connects refused while a gateway restarts (`patientMs` callers only). */
const REFUSED_WAITS_MS = [1_000, 2_000, 4_000];

/**
 * A connected client of the gateway; 502 when it does not answer within the startup wait. A
 * refused connect fails at once, unless the caller is `patientMs` patient with it: a chat right
 * after a start or wake (the gateway restarts in place once just after a boot).
 */
export async function connectGateway(
  endpoint: GatewayEndpoint,
  { patientMs = 0 }: { patientMs?: number } = {},
): Promise<GatewayClient> {
  const started = Date.now();
  const deadline = started + STARTUP_WAIT_MS;
  let refused = 0;
  for (;;) {
    try {
      return await connectCached(endpoint);
    } catch (error) {
      const wait =
        error instanceof GatewayRequestError && error.retryAfterMs !== undefined
          ? Math.min(Math.max(error.retryAfterMs, 100), 5_000)
          : error instanceof GatewayConnectError
            ? REFUSED_WAITS_MS[refused++]
            : undefined;
      const until = error instanceof GatewayConnectError ? started + patientMs : deadline;
      if (wait === undefined || Date.now() + wait > until) throw toDomainError(error);
      await delay(wait);
    }
  }
}

async function connectCached(endpoint: GatewayEndpoint): Promise<GatewayClient> {
  const key = `${endpoint.address}|${endpoint.pairing}`;
  let cached = clients.get(endpoint.id);
  if (cached && cached.key !== key) {
    cached.client.close();
    clients.delete(endpoint.id);
    cached = undefined;
  }
  if (!cached) {
    const { token, devicePrivateKeyPem } = endpoint.credentials();
    const client = new GatewayClient({
      url: `ws://${endpoint.address}`,
      token,
      device: deviceIdentityFromPrivateKey(devicePrivateKeyPem),
      connectTimeoutMs: 5_000,
      requestTimeoutMs: 30_000,
      reconnect: true,
    });
    cached = { key, address: endpoint.address, client };
    clients.set(endpoint.id, cached);
  }
  try {
    await cached.client.connect();
  } catch (error) {
    cached.client.close();
    clients.delete(endpoint.id);
    throw error;
  }
  return cached.client;
}

const REFUSED = "Agent gateway error: ";

/** The 502 of a request the gateway answered with an error (not one it never got). */
export const isGatewayRefusal = (error: DomainError) =>
  error.status === 502 && error.message.startsWith(REFUSED);

/** Maps the gateway client's failures to the API's: unreachable → 502; refused → 502 too. */
export function toDomainError(error: unknown): Error {
  if (error instanceof DomainError) return error;
  if (error instanceof GatewayUnavailableError) return gatewayUnavailable(error.message);
  if (error instanceof GatewayRequestError) {
    return new DomainError(502, `${REFUSED}${error.message}`);
  }
  return error as Error;
}

/** The gateways the process holds a client of, with the address each was opened to. */
export function cachedGatewayAddresses(): Array<{ id: string; address: string }> {
  return [...clients].map(([id, cached]) => ({ id, address: cached.address }));
}

/** Closes the gateway's cached client, if any (its endpoint changed or it went). */
export function closeGatewayClient(id: string): void {
  clients.get(id)?.client.close();
  clients.delete(id);
}

/** Closes every cached client (tests, shutdown). */
export function closeGatewayClients(): void {
  for (const { client } of clients.values()) client.close();
  clients.clear();
}
