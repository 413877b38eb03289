import {
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from "node:http";
import type { Socket } from "node:net";
import { Transform, type TransformCallback } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import WebSocket from "ws";
import { logger } from "../logger.server.ts";

// The ingress to agents' gateways: HTTP requests and WebSocket upgrades that an authority (handed
// in by the entry, which knows the areas) claims are admitted by it and proxied to the gateway's
// private address. This module only moves bytes: bodies are piped (back-pressure through pipe),
// WebSocket messages are relayed with a bounded send queue per direction, and everything has a
// size limit, a timeout and a per-agent and per-user cap on concurrent connections.
// docs/decisions/0115-agent-ingress.md

/** What the authority decided about one request. */
export type IngressVerdict =
  | {
      kind: "answer";
      status: number;
      headers?: OutgoingHttpHeaders;
      body?: string;
    }
  | {
      kind: "proxy";
      /** host:port of the gateway on the private network. */
      address: string;
      /** Path and query to ask the gateway for. */
      path: string;
      /** Keys of the concurrency caps: the agent's gateway and the signed-in user. */
      agentKey: string;
      userKey: string;
      /** Headers added to every answer (Set-Cookie of a rolled session, the page's CSP, …). */
      responseHeaders?: OutgoingHttpHeaders;
      /** Headers set on what reaches the gateway (lower case: they replace the visitor's). */
      upstreamHeaders?: Record<string, string>;
      /**
       * Rewrites an HTML answer before it is sent (the path form's base path); the gateway is
       * asked for it uncompressed, and a page larger than `maxPageBytes` is refused (502).
       */
      rewritePage?: (html: string) => string;
      /** Asked every `recheckMs` while a socket stays open: false closes it (access revoked). */
      stillAllowed?: () => Promise<boolean>;
      /**
       * Started when a socket is relayed: calling `revoke` closes it at once with 4401
       * "credential revoked" (the authority watches the credential); returns how to stop it.
       */
      watch?: (revoke: () => void) => () => void;
      /**
       * Rewrites a relayed socket's text messages, per direction (`up`: to the gateway);
       * undefined drops the message.
       */
      frames?: {
        up(text: string): string | undefined | Promise<string | undefined>;
        down(text: string): string | undefined | Promise<string | undefined>;
      };
      /** Called once when a relayed socket (or its attempt) ends. */
      onClose?: () => void;
    };

export interface IngressAuthority {
  /** Cheap and synchronous: is this request addressed to an agent? (No I/O for other requests.) */
  claims(req: IncomingMessage): boolean;
  admit(req: IncomingMessage, kind: "http" | "upgrade"): Promise<IngressVerdict>;
}

export interface IngressLimits {
  /** Concurrent requests and sockets to one agent's gateway, and of one user. */
  perAgent: number;
  perUser: number;
  /** A socket (HTTP or WebSocket) with no traffic for this long is closed. */
  idleMs: number;
  /** How long the gateway may take to start answering an HTTP request. */
  responseTimeoutMs: number;
  /** Largest HTTP request body and WebSocket message passed on. */
  maxBodyBytes: number;
  maxMessageBytes: number;
  /** Largest HTML page read whole to be rewritten (`rewritePage`). */
  maxPageBytes: number;
  /** Bytes a relayed WebSocket direction may queue before its reader is paused. */
  highWaterBytes: number;
  recheckMs: number;
}

export const DEFAULT_INGRESS_LIMITS: IngressLimits = {
  perAgent: 32,
  perUser: 64,
  idleMs: 5 * 60_000,
  responseTimeoutMs: 30_000,
  maxBodyBytes: 10 * 1024 * 1024,
  maxMessageBytes: 16 * 1024 * 1024,
  maxPageBytes: 2 * 1024 * 1024,
  highWaterBytes: 1024 * 1024,
  recheckMs: 30_000,
};

/** Close codes of relayed sockets the ingress itself closes (4000–4999: the application's). */
export const INGRESS_CLOSE = {
  revoked: 4403,
  credentialRevoked: 4401,
  gatewayGone: 1012,
  idle: 4408,
} as const;

// Connection-level and proxy-level headers the gateway must not see; `cookie` and
// `authorization` carry the platform's credentials, which stay on the platform's side.
const DROP_REQUEST = new Set([
  "connection",
  "keep-alive",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "cookie",
  "authorization",
  "x-forwarded-for",
  "x-forwarded-host",
  "x-forwarded-proto",
  "x-real-ip",
  "forwarded",
]);
const DROP_RESPONSE = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "trailer",
  "transfer-encoding",
  "upgrade",
  // The gateway sets no cookies on a host the platform signs people in on.
  "set-cookie",
]);
// Headers the ws client sets itself for the upgrade it makes to the gateway.
const WS_OWN = new Set([
  "sec-websocket-key",
  "sec-websocket-version",
  "sec-websocket-extensions",
  "sec-websocket-protocol",
  "host",
  "content-length",
]);

function forwardHeaders(
  headers: IncomingHttpHeaders | OutgoingHttpHeaders,
  drop: Set<string>,
): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  const named = new Set(
    String(headers.connection ?? "")
      .split(",")
      .map((h) => h.trim().toLowerCase()),
  );
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || drop.has(name) || named.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/** How a page to rewrite may come (navigations ask for identity; anything else may not). */
const DECODERS: Record<string, (() => Transform) | "none"> = {
  identity: "none",
  gzip: () => createGunzip(),
  "x-gzip": () => createGunzip(),
  deflate: () => createInflate(),
  br: () => createBrotliDecompress(),
};

/** A browser navigation (it asks for HTML): its answer is read as text to be rewritten. */
const isNavigation = (req: IncomingMessage) => /\btext\/html\b/i.test(req.headers.accept ?? "");

/**
 * Reads an answer's body as text (at most `limit` bytes, decompressed when it came compressed)
 * and rewrites it.
 */
async function rewritten(
  answerIn: IncomingMessage,
  rewrite: (html: string) => string,
  limit: number,
): Promise<string> {
  const encoding = String(answerIn.headers["content-encoding"] ?? "identity").toLowerCase();
  const decode = DECODERS[encoding];
  if (!decode) {
    answerIn.destroy();
    throw new Error(`The agent's gateway sent a page in an unknown encoding (${encoding})`);
  }
  // The limit counts the page as rewritten: decompressed bytes.
  let body: AsyncIterable<Buffer> = answerIn;
  if (decode !== "none") {
    const decoder = decode();
    answerIn.on("error", (error) => decoder.destroy(error));
    body = answerIn.pipe(decoder);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) {
      answerIn.destroy();
      throw new Error("The agent's gateway sent too large a page");
    }
    chunks.push(chunk);
  }
  return rewrite(Buffer.concat(chunks).toString("utf8"));
}

/** Counts bytes and fails past the limit (the request is then answered 413). */
class ByteLimit extends Transform {
  #seen = 0;
  readonly limit: number;
  constructor(limit: number) {
    super();
    this.limit = limit;
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
    this.#seen += chunk.length;
    if (this.#seen > this.limit) done(new BodyTooLarge());
    else done(null, chunk);
  }
}
class BodyTooLarge extends Error {}

function answer(res: ServerResponse, status: number, headers: OutgoingHttpHeaders, body = "") {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const isJson = body.startsWith("{");
  res.writeHead(status, {
    "Content-Type": isJson ? "application/json" : "text/plain; charset=utf-8",
    "Cache-Control": "no-store",
    ...headers,
  });
  res.end(body);
}

function refuseUpgrade(socket: Socket, status: number, reason: string, headers = {}) {
  if (socket.destroyed) return;
  const extra = Object.entries(headers as OutgoingHttpHeaders)
    .flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => `${k}: ${x}`) : [`${k}: ${v}`]))
    .join("\r\n");
  const body = JSON.stringify({ error: reason });
  socket.end(
    `HTTP/1.1 ${status} ${reason.replace(/[\r\n]/g, " ")}\r\nConnection: close\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `${extra ? `${extra}\r\n` : ""}\r\n${body}`,
  );
}

export interface Ingress {
  /** Handles the request when the authority claims it; false otherwise (not touched). */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  upgrade(req: IncomingMessage, socket: Socket, head: Buffer): boolean;
  /** Open connections now (tests and metrics). */
  open(): { total: number; byKey: Map<string, number> };
}

export function createIngress(
  authority: IngressAuthority,
  overrides: Partial<IngressLimits> = {},
): Ingress {
  const limits = { ...DEFAULT_INGRESS_LIMITS, ...overrides };
  const counts = new Map<string, number>();
  let total = 0;

  /** Takes a slot under both caps, or says which one is full. */
  function acquire(agentKey: string, userKey: string): (() => void) | undefined {
    const a = `agent:${agentKey}`;
    const u = `user:${userKey}`;
    if ((counts.get(a) ?? 0) >= limits.perAgent || (counts.get(u) ?? 0) >= limits.perUser) {
      return undefined;
    }
    counts.set(a, (counts.get(a) ?? 0) + 1);
    counts.set(u, (counts.get(u) ?? 0) + 1);
    total += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      total -= 1;
      for (const key of [a, u]) {
        const left = (counts.get(key) ?? 1) - 1;
        if (left === 0) counts.delete(key);
        else counts.set(key, left);
      }
    };
  }

  async function proxyHttp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const verdict = await authority.admit(req, "http");
    if (verdict.kind === "answer") {
      answer(res, verdict.status, verdict.headers ?? {}, verdict.body);
      return;
    }
    const declared = Number(req.headers["content-length"] ?? 0);
    if (declared > limits.maxBodyBytes) {
      answer(res, 413, {}, JSON.stringify({ error: "Request body too large" }));
      return;
    }
    const release = acquire(verdict.agentKey, verdict.userKey);
    if (!release) {
      answer(res, 429, { "Retry-After": "5" }, JSON.stringify({ error: "Too many connections" }));
      return;
    }
    res.on("close", release);
    const [host, port] = splitAddress(verdict.address);
    const upstream = httpRequest({
      host,
      port,
      method: req.method,
      path: verdict.path,
      headers: {
        ...forwardHeaders(req.headers, DROP_REQUEST),
        ...proxyHeaders(req, verdict),
        // A page to rewrite is read as text: asked uncompressed by navigations (assets keep
        // the visitor's encodings; a page that comes compressed anyway is decompressed).
        ...(verdict.rewritePage && isNavigation(req) ? { "accept-encoding": "identity" } : {}),
      },
      timeout: limits.responseTimeoutMs,
    });
    const fail = (status: number, error: string) => {
      upstream.destroy();
      answer(res, status, verdict.responseHeaders ?? {}, JSON.stringify({ error }));
    };
    upstream.on("timeout", () => fail(504, "The agent's gateway did not answer in time"));
    upstream.on("error", (error) => {
      if (error instanceof BodyTooLarge) fail(413, "Request body too large");
      else if (!res.headersSent) fail(502, "The agent's gateway is not reachable");
      else res.destroy();
    });
    upstream.on("response", (answerIn) => {
      upstream.setTimeout(limits.idleMs); // streaming answers may be quiet, but not forever
      const rewrite = verdict.rewritePage;
      const html = /^text\/html\b/i.test(String(answerIn.headers["content-type"] ?? ""));
      if (rewrite && html && req.method === "HEAD") {
        // No page to rewrite: the headers, without a length the rewritten page would not have.
        const headers = forwardHeaders(answerIn.headers, DROP_RESPONSE);
        delete headers["content-length"];
        res.writeHead(answerIn.statusCode ?? 502, { ...headers, ...verdict.responseHeaders });
        res.end();
        answerIn.resume();
        return;
      }
      if (rewrite && html) {
        void rewritten(answerIn, rewrite, limits.maxPageBytes).then(
          (page) => {
            const headers = forwardHeaders(answerIn.headers, DROP_RESPONSE);
            delete headers["content-length"];
            delete headers["content-encoding"]; // sent as rewritten: plain text
            res.writeHead(answerIn.statusCode ?? 502, {
              ...headers,
              ...verdict.responseHeaders,
              "content-length": Buffer.byteLength(page),
            });
            res.end(page);
          },
          (error: Error) => fail(502, error.message),
        );
        return;
      }
      res.writeHead(answerIn.statusCode ?? 502, {
        ...forwardHeaders(answerIn.headers, DROP_RESPONSE),
        ...verdict.responseHeaders,
      });
      answerIn.pipe(res);
      answerIn.on("error", () => res.destroy());
    });
    // The visitor went away: stop asking the gateway.
    res.on("close", () => {
      if (!res.writableFinished) upstream.destroy();
    });
    const limit = new ByteLimit(limits.maxBodyBytes);
    limit.on("error", (error) => upstream.emit("error", error));
    req.pipe(limit).pipe(upstream);
  }

  const wss = new WebSocket.Server({
    noServer: true,
    maxPayload: limits.maxMessageBytes,
    // The gateway negotiates no extensions through us: frames stay as cheap as possible.
    perMessageDeflate: false,
  });

  async function proxyUpgrade(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    const verdict = await authority.admit(req, "upgrade");
    if (verdict.kind === "answer") {
      const reason = verdict.body ? String(JSON.parse(verdict.body).error ?? "") : "Refused";
      refuseUpgrade(socket, verdict.status, reason, verdict.headers);
      return;
    }
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      verdict.onClose?.();
    };
    socket.on("close", end);
    if (socket.destroyed) {
      end(); // the visitor left while the authority decided
      return;
    }
    const release = acquire(verdict.agentKey, verdict.userKey);
    if (!release) {
      refuseUpgrade(socket, 429, "Too many connections");
      return;
    }
    socket.on("close", release);
    const protocols = String(req.headers["sec-websocket-protocol"] ?? "")
      .split(",")
      .map((p) => p.trim())
      .filter(Boolean);
    const upstream = new WebSocket(`ws://${verdict.address}${verdict.path}`, protocols, {
      headers: {
        ...(forwardHeaders(forwardHeaders(req.headers, DROP_REQUEST), WS_OWN) as Record<
          string,
          string
        >),
        ...proxyHeaders(req, verdict),
      },
      maxPayload: limits.maxMessageBytes,
      perMessageDeflate: false,
      handshakeTimeout: limits.responseTimeoutMs,
    });
    upstream.on("unexpected-response", (_r, answerIn) => {
      refuseUpgrade(socket, answerIn.statusCode === 404 ? 404 : 502, "Gateway refused the socket");
      answerIn.resume();
      upstream.terminate();
    });
    let accepted = false;
    upstream.on("error", () => {
      if (!accepted) refuseUpgrade(socket, 502, "The agent's gateway is not reachable");
    });
    let upstreamSocket: Socket | undefined;
    upstream.on("upgrade", (response) => {
      upstreamSocket = response.socket;
    });
    upstream.on("open", () => {
      if (socket.destroyed) {
        upstream.close();
        return;
      }
      accepted = true;
      wss.handleUpgrade(req, socket, head, (client) =>
        relay(
          { ws: client, socket },
          { ws: upstream, socket: upstreamSocket as Socket },
          verdict,
          limits,
        ),
      );
    });
  }

  return {
    handle(req, res) {
      if (!authority.claims(req)) return false;
      proxyHttp(req, res).catch((error: unknown) => {
        logger().error({ err: error, url: req.url }, "ingress request failed");
        answer(res, 500, {}, JSON.stringify({ error: "Internal server error" }));
      });
      return true;
    },
    upgrade(req, socket, head) {
      if (!authority.claims(req)) return false;
      socket.on("error", () => socket.destroy());
      proxyUpgrade(req, socket, head).catch((error: unknown) => {
        logger().error({ err: error, url: req.url }, "ingress upgrade failed");
        refuseUpgrade(socket, 500, "Internal server error");
      });
      return true;
    },
    open: () => ({ total, byKey: new Map(counts) }),
  };
}

/**
 * What the gateway learns from the proxy: the authority's headers only. No X-Forwarded-*: a
 * gateway that does not list the web among its trusted proxies refuses authenticated requests
 * carrying them (OpenClaw's "unattributable proxy"), and the visitor's copies are dropped.
 */
function proxyHeaders(
  _req: IncomingMessage,
  verdict: Extract<IngressVerdict, { kind: "proxy" }>,
): Record<string, string> {
  return { ...verdict.upstreamHeaders };
}

function splitAddress(address: string): [string, number] {
  const i = address.lastIndexOf(":");
  return [address.slice(0, i).replace(/^\[|\]$/g, ""), Number(address.slice(i + 1))];
}

/**
 * Relays messages both ways. Back-pressure: a direction whose destination has more than
 * `highWaterBytes` unsent pauses its source until the destination's queue has drained.
 */
interface End {
  ws: WebSocket;
  /** Its TCP socket: pausing it stops reading frames, which pushes back on the sender. */
  socket: Socket;
}

function relay(
  clientEnd: End,
  upstreamEnd: End,
  verdict: Extract<IngressVerdict, { kind: "proxy" }>,
  limits: IngressLimits,
): void {
  const client = clientEnd.ws;
  const upstream = upstreamEnd.ws;
  let idle: NodeJS.Timeout | undefined;
  const touch = () => {
    clearTimeout(idle);
    idle = setTimeout(() => closeBoth(INGRESS_CLOSE.idle, "Idle timeout"), limits.idleMs);
    idle.unref();
  };
  const recheck = verdict.stillAllowed
    ? setInterval(() => {
        verdict.stillAllowed?.().then(
          (ok) => {
            if (!ok) closeBoth(INGRESS_CLOSE.revoked, "Access revoked");
          },
          () => {},
        );
      }, limits.recheckMs)
    : undefined;
  recheck?.unref();
  const unwatch =
    verdict.watch?.(() => closeBoth(INGRESS_CLOSE.credentialRevoked, "credential revoked")) ??
    (() => {});

  function closeBoth(code: number, reason: string) {
    clearTimeout(idle);
    clearInterval(recheck);
    unwatch();
    if (client.readyState === WebSocket.OPEN) client.close(code, reason);
    if (upstream.readyState === WebSocket.OPEN) upstream.close(1000, reason);
    setTimeout(() => {
      client.terminate();
      upstream.terminate();
    }, 2_000).unref();
  }

  const pipe = (
    { ws: from, socket: source }: End,
    { ws: to }: End,
    rewrite?: (text: string) => string | undefined | Promise<string | undefined>,
  ) => {
    let queued = 0;
    let paused = false;
    // Rewritten messages keep their order: each waits for the one before it.
    let order: Promise<unknown> = Promise.resolve();
    const forward = (data: Buffer, isBinary: boolean) => {
      if (to.readyState !== WebSocket.OPEN) return;
      queued += data.length;
      to.send(data, { binary: isBinary }, () => {
        queued -= data.length;
        if (paused && queued <= limits.highWaterBytes / 2) {
          paused = false;
          source.resume();
        }
      });
      if (!paused && queued > limits.highWaterBytes) {
        paused = true;
        source.pause();
      }
    };
    from.on("message", (raw: Buffer, isBinary: boolean) => {
      touch();
      if (!rewrite) {
        forward(raw, isBinary);
        return;
      }
      if (isBinary) {
        order = order.then(() => forward(raw, isBinary));
        return;
      }
      order = order
        .then(() => rewrite(raw.toString("utf8")))
        .then(
          (text) => {
            if (text !== undefined) forward(Buffer.from(text), false);
          },
          (error: unknown) => {
            logger().warn({ err: error }, "ingress: a relayed message could not be rewritten");
            closeBoth(1013, "Try again later");
          },
        );
    });
    from.on("ping", (data) => {
      touch();
      if (to.readyState === WebSocket.OPEN) to.ping(data);
    });
  };
  pipe(clientEnd, upstreamEnd, verdict.frames?.up);
  pipe(upstreamEnd, clientEnd, verdict.frames?.down);
  touch();

  // Close codes 1005/1006 cannot be sent: they mean "no code" and "dropped".
  const sendable = (code: number) =>
    (code >= 3000 && code < 5000) || [1000, 1001, 1008, 1011, 1012, 1013].includes(code);
  client.on("close", (code, reason) => {
    clearTimeout(idle);
    clearInterval(recheck);
    unwatch();
    if (upstream.readyState === WebSocket.OPEN) {
      upstream.close(sendable(code) ? code : 1000, reason);
    } else upstream.terminate();
  });
  upstream.on("close", (code, reason) => {
    clearTimeout(idle);
    clearInterval(recheck);
    unwatch();
    // A gateway restart drops its socket: 1012 (service restart) tells the UI to reconnect.
    if (client.readyState === WebSocket.OPEN) {
      client.close(sendable(code) ? code : INGRESS_CLOSE.gatewayGone, reason);
    }
  });
  client.on("error", () => client.terminate());
  upstream.on("error", () => upstream.terminate());
}
