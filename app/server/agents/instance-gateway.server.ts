import type { GatewayClient } from "../openclaw/client.server.ts";
import {
  cachedGatewayAddresses,
  closeGatewayClient,
  closeGatewayClients,
  connectGateway,
  gatewayUnavailable,
  toDomainError,
} from "../openclaw/connections.server.ts";
import { unseal } from "../platform/crypto.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { onGatewayEndpointChange } from "./gateway-endpoints.server.ts";
import { gatewayTokenOf, getInstanceByUser, type InstanceRow } from "./instances.server.ts";

// A user's gateway as the web reaches it: the instance row gives the address, token and the
// device key the worker paired; openclaw/connections.server.ts keeps the connection.

let watching = false;

/** After messages may have been missed: the clients whose gateway's address moved close. */
async function dropMovedClients(): Promise<void> {
  const held = cachedGatewayAddresses();
  if (held.length === 0) return;
  const rows = await db()<{ id: string; gateway_address: string | null }[]>`
    select id, gateway_address from instances where id = any(${held.map((h) => h.id)}::text[])`;
  const now = new Map(rows.map((r) => [r.id, r.gateway_address]));
  for (const { id, address } of held) if (now.get(id) !== address) closeGatewayClient(id);
}

/** Cached clients go the moment their gateway's address changes (decision 0195). */
function dropClientsOnChange() {
  if (watching) return;
  watching = true;
  onGatewayEndpointChange((id) => {
    if (id) closeGatewayClient(id);
    else
      dropMovedClients().catch((error: unknown) => {
        logger().warn({ err: error }, "re-reading gateway addresses failed; closing every client");
        closeGatewayClients();
      });
  });
}

/**
 * A connected client of the instance's gateway; 502 when it is not running or not paired (or
 * it refuses the connection for longer than `patientMs`, 0 by default).
 */
export async function gatewayClientFor(
  row: InstanceRow,
  options: { patientMs?: number } = {},
): Promise<GatewayClient> {
  if (!row.device_private_key_sealed || !row.paired_at) {
    throw gatewayUnavailable("the instance is not provisioned yet");
  }
  if (row.observed_state === "sleeping") {
    throw gatewayUnavailable("the agent is asleep: send it a message to wake it");
  }
  // Cleared whenever the container is not up (decision 0195): nothing to connect to.
  if (!row.gateway_address) throw gatewayUnavailable("the agent is not running");
  const sealedDeviceKey = row.device_private_key_sealed;
  dropClientsOnChange();
  return connectGateway(
    {
      id: row.id,
      address: row.gateway_address,
      pairing: `${row.device_id}|${row.device_token_sealed ?? ""}`,
      credentials: () => ({
        token: gatewayTokenOf(row),
        devicePrivateKeyPem: unseal(sealedDeviceKey),
      }),
    },
    options,
  );
}

/**
 * Runs `fn` with the user's instance and a connected client; 404 when the user has no instance,
 * 502 when its gateway does not answer.
 */
export async function withGateway<T>(
  userId: string,
  fn: (client: GatewayClient, instance: InstanceRow) => Promise<T>,
  options: { patientMs?: number } = {},
): Promise<T> {
  const instance = await getInstanceByUser(userId);
  if (!instance) throw new DomainError(404, "No agent instance: provision an agent first");
  const client = await gatewayClientFor(instance, options);
  try {
    return await fn(client, instance);
  } catch (error) {
    throw toDomainError(error);
  }
}
