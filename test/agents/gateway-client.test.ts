import { createPublicKey, verify } from "node:crypto";
import { ws } from "msw";
import { afterEach, describe, expect, it } from "vitest";
import { gatewayClientFor } from "../../app/server/agents/instance-gateway.server.ts";
import type { InstanceRow } from "../../app/server/agents/instances.server.ts";
import { GatewayClient } from "../../app/server/openclaw/client.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import {
  deviceAuthPayloadV3,
  generateDeviceIdentity,
} from "../../app/server/openclaw/device-identity.server.ts";
import {
  GatewayRequestError,
  GatewayUnavailableError,
} from "../../app/server/openclaw/errors.server.ts";
import { seal } from "../../app/server/platform/crypto.server.ts";
import { DomainError } from "../../app/server/platform/errors.server.ts";
import { mswServer } from "../msw/server.ts";
import { helloOk } from "./fake-gateway.ts";

// The control protocol against a protocol-level fake gateway (msw's WebSocket interception):
// challenge, signed connect, requests, errors, timeouts, events, reconnect. The real gateway is
// covered by gateway-real.test.ts.

const URL = "ws://gateway.test:18789";
const SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

interface FakeOptions {
  onConnect?: (params: Record<string, unknown>, nonce: string, ts: number) => unknown;
  methods?: Record<string, (params: unknown) => unknown>;
}

let connections = 0;
function fakeGateway(options: FakeOptions = {}) {
  const link = ws.link(URL);
  mswServer.use(
    link.addEventListener("connection", ({ client }) => {
      connections++;
      const nonce = `nonce-${connections}`;
      const ts = Date.now();
      client.send(
        JSON.stringify({ type: "event", event: "connect.challenge", payload: { nonce, ts } }),
      );
      client.addEventListener("message", (event) => {
        const frame = JSON.parse(String(event.data));
        if (frame.method === "connect") {
          const failure = options.onConnect?.(frame.params, nonce, ts);
          if (failure) {
            client.send(JSON.stringify({ type: "res", id: frame.id, ok: false, error: failure }));
            return;
          }
          client.send(helloOk(frame, `c${connections}`, { deviceToken: "dev-token" }));
          return;
        }
        const handler = options.methods?.[frame.method];
        if (!handler) return; // never answers: the client's timeout fires
        try {
          const payload = handler(frame.params);
          client.send(JSON.stringify({ type: "res", id: frame.id, ok: true, payload }));
          if (frame.method === "chat.send") {
            client.send(
              JSON.stringify({ type: "event", event: "chat", payload: { state: "final" } }),
            );
          }
          if (frame.method === "drop") setTimeout(() => client.close(), 20);
        } catch (error) {
          client.send(
            JSON.stringify({
              type: "res",
              id: frame.id,
              ok: false,
              error: {
                code: "INVALID_REQUEST",
                message: (error as Error).message,
                details: { reason: "bad" },
              },
            }),
          );
        }
      });
    }),
  );
}

afterEach(() => {
  mswServer.resetHandlers();
});

describe("gateway client (protocol fake)", () => {
  it("answers the challenge with a v3-signed device identity and the token", async () => {
    const device = generateDeviceIdentity();
    let checked = false;
    fakeGateway({
      onConnect: (params, nonce, ts) => {
        const d = params.device as Record<string, string | number>;
        const auth = params.auth as Record<string, string>;
        expect(params).toMatchObject({ minProtocol: 4, maxProtocol: 4, role: "operator" });
        expect(auth).toEqual({ token: "gw-token" });
        expect(d).toMatchObject({ id: device.deviceId, nonce, signedAt: ts });
        const key = createPublicKey({
          key: Buffer.concat([SPKI_PREFIX, Buffer.from(String(d.publicKey), "base64url")]),
          format: "der",
          type: "spki",
        });
        const payload = deviceAuthPayloadV3({
          deviceId: device.deviceId,
          clientId: (params.client as { id: string }).id,
          clientMode: (params.client as { mode: string }).mode,
          role: "operator",
          scopes: params.scopes as string[],
          signedAtMs: ts,
          token: "gw-token",
          nonce,
          platform: "linux",
          deviceFamily: "server",
        });
        checked = verify(
          null,
          Buffer.from(payload),
          key,
          Buffer.from(String(d.signature), "base64url"),
        );
        return checked ? undefined : { code: "DEVICE_AUTH_SIGNATURE_INVALID" };
      },
      methods: { health: () => ({ ok: true }) },
    });
    const client = new GatewayClient({ url: URL, token: "gw-token", device, reconnect: false });
    try {
      const hello = await client.connect();
      expect(checked).toBe(true);
      expect(hello.server.version).toBe("2026.9.6");
      expect(hello.auth?.deviceToken).toBe("dev-token");
      expect(await client.request("health")).toEqual({ ok: true });
    } finally {
      client.close();
    }
  });

  it("maps gateway errors, timeouts and a refused connect", async () => {
    fakeGateway({
      methods: {
        "config.patch": () => {
          throw new Error("stale base hash");
        },
      },
    });
    const client = new GatewayClient({
      url: URL,
      token: "t",
      reconnect: false,
      requestTimeoutMs: 200,
    });
    try {
      const failure = await client.request("config.patch", {}).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(GatewayRequestError);
      expect(failure).toMatchObject({ code: "INVALID_REQUEST", details: { reason: "bad" } });
      await expect(client.request("never.answered")).rejects.toBeInstanceOf(
        GatewayUnavailableError,
      );
    } finally {
      client.close();
    }
    mswServer.resetHandlers();
    fakeGateway({
      onConnect: () => ({
        code: "NOT_PAIRED",
        message: "pairing required",
        details: { requestId: "r1" },
      }),
    });
    const refused = new GatewayClient({ url: URL, token: "t", reconnect: false });
    const error = await refused.connect().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(GatewayRequestError);
    expect((error as GatewayRequestError).details?.requestId).toBe("r1");
    expect((error as Error).message).toMatch(/NOT_PAIRED.*requestId=r1/);
    refused.close();
  });

  it("the web's connection waits for a gateway that says it is still starting, within a bound", async () => {
    // What OpenClaw answers between /healthz and accepting control connections after a boot.
    const starting = {
      code: "UNAVAILABLE",
      message: "gateway starting; retry shortly",
      retryable: true,
      retryAfterMs: 50,
    };
    let refusals = 2;
    fakeGateway({
      onConnect: () => (refusals-- > 0 ? starting : undefined),
      methods: { health: () => ({ ok: true }) },
    });
    const row = {
      id: "ins_starting",
      gateway_address: "gateway.test:18789",
      gateway_token_sealed: seal("gw-token"),
      device_id: "d",
      device_private_key_sealed: seal(generateDeviceIdentity().privateKeyPem),
      device_token_sealed: null,
      paired_at: new Date(),
    } as InstanceRow;
    try {
      const client = await gatewayClientFor(row);
      expect(refusals).toBe(-1); // refused twice, then accepted
      expect(await client.request("health")).toEqual({ ok: true });
    } finally {
      closeGatewayClients();
    }

    // Anything the gateway does not call retryable fails at once, as a 502.
    mswServer.resetHandlers();
    fakeGateway({ onConnect: () => ({ code: "NOT_PAIRED", message: "pairing required" }) });
    const before = connections;
    const refused = await gatewayClientFor(row).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DomainError);
    expect(refused).toMatchObject({ status: 502 });
    expect(connections - before).toBe(1); // not retried
    closeGatewayClients();
    expect(
      new GatewayRequestError("connect", { code: "UNAVAILABLE", retryable: true }).retryAfterMs,
    ).toBe(500);
    expect(new GatewayRequestError("connect", { code: "UNAVAILABLE" }).retryAfterMs).toBe(
      undefined,
    );
  });

  it("delivers events and reconnects by itself after the gateway drops the socket", async () => {
    fakeGateway({
      methods: { "chat.send": () => ({ runId: "r" }), drop: () => ({}), health: () => ({ ok: 1 }) },
    });
    const events: string[] = [];
    const client = new GatewayClient({ url: URL, token: "t", onEvent: (e) => events.push(e) });
    try {
      const first = (await client.connect()).server.connId;
      await client.request("chat.send", { message: "hi" });
      await expect.poll(() => events).toContain("chat");
      await client.request("drop");
      await expect.poll(() => client.hello?.server.connId, { timeout: 5_000 }).not.toBe(first);
      expect(await client.request("health")).toEqual({ ok: 1 });
    } finally {
      client.close();
    }
  });
});
