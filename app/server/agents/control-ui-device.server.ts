import { createPrivateKey, sign } from "node:crypto";
import { z } from "zod";
import { GatewayClient } from "../openclaw/client.server.ts";
import {
  type DeviceIdentity,
  deviceAuthPayloadV3,
  generateDeviceIdentity,
} from "../openclaw/device-identity.server.ts";
import { GatewayRequestError } from "../openclaw/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { gatewayClientFor } from "./instance-gateway.server.ts";
import { gatewayTokenOf, type InstanceRow } from "./instances.server.ts";

// The browser's Control UI reaches its gateway through the ingress, which is the device the
// gateway sees (docs/decisions/0170-control-ui-through-the-ingress.md): the gateway runs with a
// shared token, and a device signature covers the token presented, so the browser (which never
// sees the token) cannot sign a connect the gateway accepts. For each browser socket the ingress
// makes a fresh Ed25519 device when the browser's `connect` arrives, has the platform's operator
// connection approve its pairing, and rewrites the browser's `connect` to present the token and that device, signing the gateway's
// own nonce. The device lives as long as the socket: its key stays in this process's memory,
// and closing the socket (sign-out, loss of access, deletion: the ingress closes it) removes the
// pairing from the gateway.

export const CONTROL_UI_CLIENT_ID = "openclaw-control-ui";
/**
 * The Origin the ingress presents to gateways (after checking the visitor's own), and the one
 * origin their config allows: a gateway with its Control UI on a non-loopback bind refuses to
 * start without an explicit allow-list, and agents' addresses are many and change.
 */
export const INGRESS_ORIGIN = "https://ingress.agent-platform.invalid";
/** What the browser's UI may do: no gateway admin (config, auth) and no pairing of devices. */
export const CONTROL_UI_SCOPES = [
  "operator.read",
  "operator.write",
  "operator.approvals",
  "operator.questions",
];
const PAIRING_ATTEMPTS = 6;

export interface ControlUiDevice {
  device: DeviceIdentity;
  /** Removes the pairing from the gateway (the socket closed); never throws. */
  release(): Promise<void>;
}

const requestIdOf = (error: GatewayRequestError) => {
  const id = error.details?.requestId;
  return typeof id === "string" && id ? id : undefined;
};

/** Who the browser's UI says it is (the gateway pins a device's platform and family). */
interface UiClient {
  id: string;
  mode: string;
  platform: string;
  deviceFamily: string;
}

/** A device paired on the instance's gateway for one browser socket. */
export async function pairControlUiDevice(
  instance: InstanceRow,
  who: UiClient,
): Promise<ControlUiDevice> {
  if (!instance.gateway_address) throw new Error("the gateway has no address");
  const device = generateDeviceIdentity();
  const operator = await gatewayClientFor(instance);
  for (let attempt = 0; ; attempt++) {
    const client = new GatewayClient({
      url: `ws://${instance.gateway_address}`,
      token: gatewayTokenOf(instance),
      device,
      scopes: CONTROL_UI_SCOPES,
      client: who,
      origin: INGRESS_ORIGIN,
      connectTimeoutMs: 10_000,
      requestTimeoutMs: 10_000,
      reconnect: false,
    });
    try {
      await client.connect();
      break;
    } catch (error) {
      if (!(error instanceof GatewayRequestError) || attempt >= PAIRING_ATTEMPTS) throw error;
      const requestId = requestIdOf(error);
      if (requestId) await operator.request("device.pair.approve", { requestId });
      else await new Promise((r) => setTimeout(r, 200 * (attempt + 1)));
    } finally {
      client.close();
    }
  }
  return {
    device,
    release: async () => {
      try {
        await (await gatewayClientFor(instance)).request("device.pair.remove", {
          deviceId: device.deviceId,
        });
      } catch (error) {
        // A gateway that is gone took the pairing with it; the key was only ever in memory.
        logger().warn({ err: error, instance: instance.id }, "control ui device not removed");
      }
    },
  };
}

/** A Control UI device older than this with no connection is taken for a dead socket's. */
export const CONTROL_UI_ORPHAN_AFTER_MS = 5 * 60_000;
const PairedDevices = z
  .object({
    paired: z
      .array(
        z
          .object({
            deviceId: z.string(),
            clientId: z.string().optional(),
            connected: z.boolean().optional(),
            approvedAtMs: z.number().optional(),
            createdAtMs: z.number().optional(),
          })
          .passthrough(),
      )
      .default([]),
  })
  .passthrough();

/**
 * Removes the Control UI devices no socket uses any more (decision 0170). Each browser socket has
 * a device of its own, removed when the socket closes; one the gateway sees unconnected, paired
 * longer ago than a socket takes to connect, was left by a web process that died with its key
 * (nobody can use it, but it stays listed as paired). `client` is a paired operator connection.
 * Returns the devices removed.
 */
export async function sweepControlUiDevices(
  client: GatewayClient,
  now = Date.now(),
): Promise<string[]> {
  const list = PairedDevices.parse(await client.request("device.pair.list", {}));
  const orphans = list.paired.filter(
    (d) =>
      d.clientId === CONTROL_UI_CLIENT_ID &&
      d.connected === false &&
      (d.approvedAtMs ?? d.createdAtMs ?? now) <= now - CONTROL_UI_ORPHAN_AFTER_MS,
  );
  for (const orphan of orphans) {
    await client.request("device.pair.remove", { deviceId: orphan.deviceId });
  }
  return orphans.map((d) => d.deviceId);
}

const ConnectFrame = z
  .object({
    type: z.literal("req"),
    id: z.string(),
    method: z.literal("connect"),
    params: z.object({ client: z.object({}).passthrough() }).passthrough(),
  })
  .passthrough();
const Challenge = z.object({
  type: z.literal("event"),
  event: z.literal("connect.challenge"),
  payload: z.object({ nonce: z.string().min(1) }).passthrough(),
});
const HelloAnswer = z
  .object({
    type: z.literal("res"),
    payload: z
      .object({ type: z.literal("hello-ok"), auth: z.object({}).passthrough().optional() })
      .passthrough(),
  })
  .passthrough();

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * The frame filter of one relayed socket: remembers the gateway's challenge; at the browser's
 * `connect` pairs a device for this socket and rewrites the frame (the token and that device,
 * signing the gateway's nonce); keeps device tokens in the gateway's answers from the browser.
 * Other frames pass untouched. `close` removes the pairing (when one was made).
 */
export function controlUiSocket(instance: InstanceRow) {
  let nonce: string | undefined;
  let connected = false;
  let paired: Promise<ControlUiDevice> | undefined;
  let closed = false;
  const token = gatewayTokenOf(instance);
  return {
    async up(text: string): Promise<string | undefined> {
      if (connected) return text;
      const frame = ConnectFrame.safeParse(parsed(text));
      if (!frame.success) return text;
      if (!nonce) return undefined; // a connect before the challenge cannot be signed: dropped
      const browser = frame.data.params.client;
      const str = (v: unknown, fallback: string) => (typeof v === "string" ? v : fallback);
      const who: UiClient = {
        id: CONTROL_UI_CLIENT_ID,
        mode: str(browser.mode, "webchat"),
        platform: str(browser.platform, "web"),
        deviceFamily: str(browser.deviceFamily, ""),
      };
      paired ??= pairControlUiDevice(instance, who);
      const { device } = await paired;
      if (closed) return undefined;
      const { deviceFamily: _family, ...rest } = browser;
      const client = {
        ...rest,
        id: who.id,
        mode: who.mode,
        platform: who.platform,
        ...(who.deviceFamily ? { deviceFamily: who.deviceFamily } : {}),
      };
      const signedAt = Date.now();
      const payload = deviceAuthPayloadV3({
        deviceId: device.deviceId,
        clientId: who.id,
        clientMode: who.mode,
        role: "operator",
        scopes: CONTROL_UI_SCOPES,
        signedAtMs: signedAt,
        token,
        nonce,
        platform: who.platform,
        deviceFamily: who.deviceFamily,
      });
      connected = true;
      return JSON.stringify({
        ...frame.data,
        params: {
          ...frame.data.params,
          client,
          role: "operator",
          scopes: CONTROL_UI_SCOPES,
          auth: { token },
          device: {
            id: device.deviceId,
            publicKey: device.publicKey,
            signature: sign(
              null,
              Buffer.from(payload),
              createPrivateKey(device.privateKeyPem),
            ).toString("base64url"),
            signedAt,
            nonce,
          },
        },
      });
    },
    down(text: string): string {
      if (!connected && text.includes("connect.challenge")) {
        const challenge = Challenge.safeParse(parsed(text));
        if (challenge.success) nonce = challenge.data.payload.nonce;
        return text;
      }
      if (!text.includes("deviceToken")) return text;
      const hello = HelloAnswer.safeParse(parsed(text));
      if (!hello.success || !hello.data.payload.auth) return text;
      const { deviceToken: _t, deviceTokens: _ts, ...auth } = hello.data.payload.auth;
      return JSON.stringify({ ...hello.data, payload: { ...hello.data.payload, auth } });
    },
    close(): void {
      closed = true;
      paired?.then(
        (device) => device.release(),
        () => {},
      );
    },
  };
}
