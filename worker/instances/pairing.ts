import {
  gatewayTokenOf,
  type InstancePatch,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { GatewayClient, type HelloOk } from "../../app/server/openclaw/client.server.ts";
import {
  type DeviceIdentity,
  deviceIdentityFromPrivateKey,
  generateDeviceIdentity,
} from "../../app/server/openclaw/device-identity.server.ts";
import { GatewayRequestError } from "../../app/server/openclaw/errors.server.ts";
import { seal, unseal } from "../../app/server/platform/crypto.server.ts";
import { rt } from "./engine.ts";
import { loopbackApproveCommand } from "./loopback-approve.ts";

// The platform's operator connection to a gateway: an Ed25519 device identity per instance,
// paired once (the gateway asks, the platform approves inside the container).

/** Attempts before a connection that keeps asking for pairing or startup gives up. */
const CONNECT_ATTEMPTS = 12;

/** The platform's device identity for this instance (created and sealed on first use). */
async function deviceOf(row: InstanceRow): Promise<{ row: InstanceRow; device: DeviceIdentity }> {
  if (row.device_private_key_sealed) {
    return { row, device: deviceIdentityFromPrivateKey(unseal(row.device_private_key_sealed)) };
  }
  const device = generateDeviceIdentity();
  const next = await updateInstance(row.id, {
    device_id: device.deviceId,
    device_private_key_sealed: seal(device.privateKeyPem),
  });
  return { row: next, device };
}

function pairingRequestId(error: GatewayRequestError): string | undefined {
  const id = error.details?.requestId;
  return typeof id === "string" && id.length > 0 ? id : undefined;
}

/** A refusal worth another attempt: not paired yet, or the gateway still starting. */
function retryable(error: GatewayRequestError): boolean {
  return (
    /NOT_PAIRED|PAIRING/i.test(`${error.code} ${error.message}`) ||
    error.code === "UNAVAILABLE" ||
    /startup/i.test(String(error.details?.reason ?? ""))
  );
}

/** Approves the request inside the container, over the gateway's loopback (loopback-approve.ts). */
async function approvePairing(container: string, requestId: string): Promise<void> {
  const result = await rt().exec(container, loopbackApproveCommand(requestId), {
    timeoutMs: 60_000,
  });
  if (result.exitCode !== 0) {
    throw new Error(`device approval failed: ${(result.stderr || result.stdout).slice(0, 500)}`);
  }
}

/**
 * Connects as the platform's operator device, pairing it first when the gateway does not know
 * it: the gateway answers NOT_PAIRED with a requestId, which a script inside the container
 * approves over the gateway's loopback with the instance token (loopback-approve.ts).
 */
export async function connectWithPairing(target: {
  container: string;
  address: string;
  token: string;
  device: DeviceIdentity;
}): Promise<{ client: GatewayClient; hello: HelloOk }> {
  const approved = new Set<string>();
  for (let attempt = 0; ; attempt++) {
    const client = new GatewayClient({
      url: `ws://${target.address}`,
      token: target.token,
      device: target.device,
      connectTimeoutMs: 15_000,
      requestTimeoutMs: 15_000,
      reconnect: false,
    });
    try {
      return { client, hello: await client.connect() };
    } catch (error) {
      client.close();
      if (!(error instanceof GatewayRequestError) || attempt >= CONNECT_ATTEMPTS) throw error;
      if (!retryable(error)) throw error;
      const requestId = pairingRequestId(error);
      if (requestId && !approved.has(requestId)) {
        // Approve once per request; an approval lands asynchronously, so a NOT_PAIRED right
        // after it (with the same or no request id) is retried after a short wait.
        await approvePairing(target.container, requestId);
        approved.add(requestId);
      } else {
        await new Promise((r) => setTimeout(r, Math.min(250 * (attempt + 1), 3_000)));
      }
    }
  }
}

/** connectWithPairing for an instance; records version, device token and pairing time. */
export async function connectPaired(
  row: InstanceRow,
  address: string,
): Promise<{ client: GatewayClient; hello: HelloOk; row: InstanceRow }> {
  const { row: current, device } = await deviceOf(row);
  const { client, hello } = await connectWithPairing({
    container: current.container_id ?? current.container_name,
    address,
    token: gatewayTokenOf(current),
    device,
  });
  const patch: InstancePatch = { gateway_version: hello.server.version };
  if (hello.auth?.deviceToken) patch.device_token_sealed = seal(hello.auth.deviceToken);
  if (!current.paired_at) patch.paired_at = new Date();
  return { client, hello, row: await updateInstance(current.id, patch) };
}
