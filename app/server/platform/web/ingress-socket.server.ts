import type { IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import WebSocket from "ws";
import { logger } from "../logger.server.ts";
import { DROP_REQUEST, forwardHeaders, proxyHeaders, WS_OWN } from "./ingress-headers.server.ts";
import {
  INGRESS_CLOSE,
  type IngressContext,
  type IngressLimits,
  type IngressVerdict,
} from "./ingress-types.server.ts";
import { refuseUpgrade } from "./upgrade-refusal.server.ts";

// The ingress's WebSocket half: an upgrade admitted by the authority is opened to the gateway
// and the two sockets relayed, messages rewritten per direction when the authority asks, with a
// bounded send queue each way, an idle timeout and a periodic re-check of access.

/** The upgrade handler of one ingress (its WebSocket server only completes handshakes). */
export function createSocketProxy(
  ctx: IngressContext,
): (req: IncomingMessage, socket: Socket, head: Buffer) => Promise<void> {
  const { authority, limits, acquire } = ctx;
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
  return proxyUpgrade;
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
