import { createPrivateKey, randomUUID, sign } from "node:crypto";
import { type DeviceIdentity, deviceAuthPayloadV3 } from "./device-identity.server.ts";
import {
  GatewayConnectError,
  type GatewayErrorShape,
  GatewayRequestError,
  GatewayUnavailableError,
} from "./errors.server.ts";

// Client of the OpenClaw gateway's WebSocket control protocol (v4, docs/gateway/protocol/*.md
// in the openclaw package): the server sends `connect.challenge {nonce, ts}`; we answer
// `connect` as an operator with the instance's gateway token and a signed Ed25519 device
// identity (payload v3); `hello-ok` carries server.version and, once the device is paired,
// auth.deviceToken. Then `{type:"req"}` / `{type:"res"}` frames with timeouts, and events.
// Device auth is never turned off and no origin is allowed by the platform: over the bridge
// network a token alone gives no scopes, so the device is paired once at provisioning.

export const PROTOCOL_VERSION = 4;
export const CLIENT_ID = "gateway-client";
export const CLIENT_MODE = "backend";
export const PLATFORM = "linux";
export const OPERATOR_SCOPES = [
  "operator.read",
  "operator.write",
  "operator.admin",
  "operator.approvals",
  "operator.pairing",
];

export interface HelloOk {
  type: "hello-ok";
  protocol: number;
  server: { version: string; connId?: string };
  features?: { methods?: string[]; events?: string[] };
  auth?: { role?: string; scopes?: string[]; deviceToken?: string };
  snapshot?: Record<string, unknown>;
  policy?: Record<string, unknown>;
}

export interface GatewayClientOptions {
  /** ws://host:port of the gateway. */
  url: string;
  /** The instance's gateway token (shared secret); omitted when connecting by device token. */
  token?: string;
  device?: DeviceIdentity;
  deviceToken?: string;
  scopes?: string[];
  /** Who connects (default: the platform's backend client); signed into the device payload. */
  client?: { id: string; mode: string; platform: string; deviceFamily: string };
  /** Origin header of the upgrade (a browser UI client is refused by the gateway without one). */
  origin?: string;
  connectTimeoutMs?: number;
  requestTimeoutMs?: number;
  /** Reconnect after the socket drops (gateway restart), with backoff. Default true. */
  reconnect?: boolean;
  onEvent?: (event: string, payload: unknown) => void;
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
  method: string;
}

type Frame =
  | { type: "event"; event: string; payload?: unknown; seq?: number }
  | {
      type: "res";
      id: string;
      ok: boolean;
      payload?: unknown;
      error?: GatewayErrorShape;
    };

export class GatewayClient {
  readonly options: GatewayClientOptions;
  hello: HelloOk | undefined;
  #ws: WebSocket | undefined;
  #pending = new Map<string, Pending>();
  #closed = false;
  #ready: Promise<HelloOk> | undefined;
  #listeners = new Set<(event: string, payload: unknown) => void>();
  #reconnects = 0;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #dropListeners = new Set<() => void>();
  #handshook = false;

  constructor(options: GatewayClientOptions) {
    this.options = options;
    if (options.onEvent) this.#listeners.add(options.onEvent);
  }

  /** Opens the socket and completes the handshake; resolves with hello-ok. */
  connect(): Promise<HelloOk> {
    this.#closed = false;
    this.#ready ??= this.#open().catch((error) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }

  onEvent(fn: (event: string, payload: unknown) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  /** Called whenever the connection drops (also when a reconnect attempt fails). */
  onDrop(fn: () => void): () => void {
    this.#dropListeners.add(fn);
    return () => this.#dropListeners.delete(fn);
  }

  /** The handshake is done on a socket still open (false while it reconnects). */
  get connected(): boolean {
    return this.#handshook && this.#ws?.readyState === WebSocket.OPEN;
  }

  /** Sends a request and waits for its response (timeout → GatewayUnavailableError). */
  async request<T = unknown>(
    method: string,
    params: unknown = {},
    options: { timeoutMs?: number } = {},
  ): Promise<T> {
    await this.connect();
    return this.#send<T>(
      method,
      params,
      options.timeoutMs ?? this.options.requestTimeoutMs ?? 15_000,
    );
  }

  close(): void {
    this.#closed = true;
    this.#handshook = false;
    clearTimeout(this.#reconnectTimer);
    this.#reconnectTimer = undefined;
    this.#ready = undefined;
    this.#ws?.close();
    this.#ws = undefined;
    this.#failAll(new GatewayUnavailableError("client closed"));
  }

  #send<T>(method: string, params: unknown, timeoutMs: number): Promise<T> {
    const ws = this.#ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) {
      return Promise.reject(new GatewayUnavailableError(`${method}: not connected`));
    }
    const id = randomUUID();
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new GatewayUnavailableError(`${method}: no response within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer, method });
      ws.send(JSON.stringify({ type: "req", id, method, params }));
    });
  }

  #failAll(error: Error): void {
    for (const [id, p] of this.#pending) {
      clearTimeout(p.timer);
      p.reject(error);
      this.#pending.delete(id);
    }
  }

  #open(): Promise<HelloOk> {
    const timeoutMs = this.options.connectTimeoutMs ?? 10_000;
    return new Promise<HelloOk>((resolve, reject) => {
      let settled = false;
      const finish = (error: Error | undefined, hello?: HelloOk) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (error) {
          ws.close();
          reject(error);
        } else resolve(hello as HelloOk);
      };
      const timer = setTimeout(
        () => finish(new GatewayConnectError(`connect: no hello within ${timeoutMs} ms`)),
        timeoutMs,
      );
      let ws: WebSocket;
      try {
        // Node's WebSocket (undici) takes headers: a browser client's Origin, when one is set.
        ws = this.options.origin
          ? new WebSocket(this.options.url, {
              headers: { origin: this.options.origin },
            } as unknown as string[])
          : new WebSocket(this.options.url);
      } catch (error) {
        clearTimeout(timer);
        reject(new GatewayConnectError(`connect: ${(error as Error).message}`));
        return;
      }
      this.#ws = ws;
      ws.addEventListener("error", () => {
        finish(new GatewayConnectError(`connect: socket error on ${this.options.url}`));
      });
      ws.addEventListener("close", () => {
        finish(new GatewayConnectError("connect: socket closed during the handshake"));
        if (this.#ws === ws) this.#onDrop();
      });
      ws.addEventListener("message", (message) => {
        let frame: Frame;
        try {
          frame = JSON.parse(String(message.data)) as Frame;
        } catch {
          return;
        }
        if (frame.type === "event" && frame.event === "connect.challenge" && !settled) {
          const { nonce, ts } = (frame.payload ?? {}) as { nonce?: string; ts?: number };
          if (typeof nonce !== "string" || typeof ts !== "number") {
            finish(new GatewayRequestError("connect", { code: "BAD_CHALLENGE" }));
            return;
          }
          this.#send<HelloOk>("connect", this.#connectParams(nonce, ts), timeoutMs).then(
            (hello) => {
              this.hello = hello;
              this.#handshook = true;
              this.#reconnects = 0;
              finish(undefined, hello);
            },
            (error: Error) => finish(error),
          );
          return;
        }
        if (frame.type === "res") {
          const p = this.#pending.get(frame.id);
          if (!p) return;
          this.#pending.delete(frame.id);
          clearTimeout(p.timer);
          if (frame.ok) p.resolve(frame.payload);
          else p.reject(new GatewayRequestError(p.method, frame.error ?? {}));
          return;
        }
        if (frame.type === "event") {
          for (const fn of this.#listeners) fn(frame.event, frame.payload);
        }
      });
    });
  }

  #connectParams(nonce: string, signedAtMs: number) {
    const { token, deviceToken, device } = this.options;
    const scopes = this.options.scopes ?? OPERATOR_SCOPES;
    const role = "operator";
    const who = this.options.client ?? {
      id: CLIENT_ID,
      mode: CLIENT_MODE,
      platform: PLATFORM,
      deviceFamily: "server",
    };
    // The signature binds the credential presented: the shared token, else the device token.
    const signatureToken = token ?? deviceToken ?? "";
    const auth: Record<string, string> = {};
    if (token) auth.token = token;
    if (deviceToken) auth.deviceToken = deviceToken;
    return {
      minProtocol: PROTOCOL_VERSION,
      maxProtocol: PROTOCOL_VERSION,
      client: {
        id: who.id,
        version: "1.0.0",
        platform: who.platform,
        mode: who.mode,
        // The gateway refuses an empty family; absent and empty sign the same.
        ...(who.deviceFamily ? { deviceFamily: who.deviceFamily } : {}),
      },
      role,
      scopes,
      caps: [],
      commands: [],
      permissions: {},
      auth,
      locale: "en-US",
      userAgent: "agent-platform/1.0.0",
      device: device
        ? {
            id: device.deviceId,
            publicKey: device.publicKey,
            signature: sign(
              null,
              Buffer.from(
                deviceAuthPayloadV3({
                  deviceId: device.deviceId,
                  clientId: who.id,
                  clientMode: who.mode,
                  role,
                  scopes,
                  signedAtMs,
                  token: signatureToken,
                  nonce,
                  platform: who.platform,
                  deviceFamily: who.deviceFamily,
                }),
              ),
              createPrivateKey(device.privateKeyPem),
            ).toString("base64url"),
            signedAt: signedAtMs,
            nonce,
          }
        : undefined,
    };
  }

  #onDrop(): void {
    this.#ws = undefined;
    this.#ready = undefined;
    this.#handshook = false;
    this.#failAll(new GatewayUnavailableError("connection to the gateway dropped"));
    for (const fn of this.#dropListeners) fn();
    if (this.#closed || this.options.reconnect === false || this.#reconnectTimer) return;
    // Reconnect with backoff (0.25 s … 5 s); a failed attempt's socket close schedules the next.
    const delay = Math.min(250 * 2 ** this.#reconnects, 5_000);
    this.#reconnects += 1;
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      if (this.#closed || this.#ready) return;
      this.connect().catch(() => {
        if (!this.#closed && !this.#ws && !this.#reconnectTimer) this.#onDrop();
      });
    }, delay);
    this.#reconnectTimer.unref();
  }
}
