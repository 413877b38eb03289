import type { IncomingMessage, Server } from "node:http";
import type { Socket } from "node:net";
import WebSocket from "ws";
import { authenticate, isForeignOrigin } from "../accounts/auth.server.ts";
import { type LiveCredential, liveCredentialOf } from "../accounts/credential-watch.server.ts";
import { connectionSlots } from "../platform/connection-slots.server.ts";
import { DATABASE_UNAVAILABLE, isDatabaseUnavailable } from "../platform/db-unavailable.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { consume } from "../platform/rate-limit.server.ts";
import { refuseUpgrade } from "../platform/web/upgrade-refusal.server.ts";
import { guardLive, mayStillUse, REVOKED } from "./live-access.server.ts";
import { chat } from "./talk.server.ts";

// The live agent socket, ws://<host>/agent/<user_id> (the agents' websocketUrl): the owner,
// signed in by session cookie or API key, sends chat messages; each is relayed to their gateway
// with chat.send and the reply streams back as it is produced, with the run's agent events.
// docs/decisions/0082-live-agent-socket.md
//
// Client → server: {type: "chat", id?, message, sessionId?, agentId?} | {type: "ping"}
// Server → client: {type: "ready", userId} | {type: "delta", id, text} |
//   {type: "event", id, event, payload} | {type: "final", id, sessionId, reply, timestamp} |
//   {type: "error", id?, status, error, delivered?} | {type: "pong"} (delivered: true when the
//   turn failed after the gateway had taken its message: do not send it again; "unknown" when
//   its send went unanswered: the agent's messages tell, decision 0246)
//
// The socket lives only as long as its credential: it closes with 4401 "credential revoked" on
// sign-out, a revoked session, a deleted key, a password reset or a suspension
// (docs/decisions/0198-live-sockets-recheck-their-credential.md).
// A person holds at most LIVE_SOCKETS_PER_USER open sockets on one web process: one more is
// answered 429 {error} before its upgrade; a slot is freed when its connection closes
// (docs/decisions/0220-live-socket-caps.md).

export const PATH = /^\/agent\/([^/?#]+)\/?$/;
/** Close codes (4000–4999 are the application's): no credential, foreign page, not yours. */
export const CLOSE = {
  unauthorized: 4401,
  forbidden: 4403,
  notFound: 4404,
  badMessage: 4400,
} as const;
const MAX_MESSAGE_BYTES = 64 * 1024;
/** Turns a socket may have waiting or running; one more is refused with an error frame. */
export const MAX_PENDING_TURNS = 8;

const wss = new WebSocket.Server({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });
/** Open sockets per person on this process (whoever's agents they talk to). */
const slots = connectionSlots();

/** Live sockets open on this process (tests and the operator's view). */
export const openLiveSockets = () => slots.total();

function requestOf(req: IncomingMessage): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value === "string") headers.set(name, value);
    else if (Array.isArray(value)) headers.set(name, value.join(", "));
  }
  return new Request(`http://${req.headers.host ?? "localhost"}${req.url ?? "/"}`, { headers });
}

/**
 * Who may open this socket: the credential and the owner whose agents it talks to (the person,
 * or an organisation whose member may chat: /agent/<organisation id>), or the close code.
 */
async function admit(
  req: IncomingMessage,
  pathUserId: string,
): Promise<{ credential: LiveCredential; ownerId: string } | { code: number; reason: string }> {
  const request = requestOf(req);
  let auth: Awaited<ReturnType<typeof authenticate>>;
  try {
    auth = await authenticate(request);
  } catch {
    return { code: CLOSE.unauthorized, reason: "Invalid credential" };
  }
  if (!auth) return { code: CLOSE.unauthorized, reason: "Authentication required" };
  // A page on another site must not drive the owner's agent with their cookie.
  if (auth.via === "session" && isForeignOrigin(request)) {
    return { code: CLOSE.forbidden, reason: "Cross-site socket refused" };
  }
  const credential = liveCredentialOf(auth);
  const target = { ownerId: pathUserId };
  // The person's own agents, or those of an organisation whose member may chat with them.
  if (!(await mayStillUse(credential, target))) {
    return { code: CLOSE.notFound, reason: "Agent not found" };
  }
  return { credential, ownerId: pathUserId };
}

function send(ws: WebSocket, frame: Record<string, unknown>): void {
  if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
}

function serve(ws: WebSocket, credential: LiveCredential, ownerId: string): void {
  // Turns run for the owner (a person's own agents, or their organisation's).
  const userId = ownerId;
  const target = { ownerId };
  let revoked = false;
  const revoke = () => {
    revoked = true;
    ws.close(CLOSE.unauthorized, REVOKED);
  };
  const stopGuard = guardLive(credential, target, revoke);
  ws.on("close", stopGuard);
  send(ws, { type: "ready", userId });
  // One turn at a time per socket: the gateway queues a session's turns anyway, and ordered
  // replies keep the client simple. Bounded: a client that sends faster than its agent answers
  // is told so instead of piling up work (and memory) without end.
  let queue = Promise.resolve();
  let pending = 0;
  ws.on("message", (data) => {
    let frame: {
      type?: string;
      id?: unknown;
      message?: unknown;
      sessionId?: unknown;
      agentId?: unknown;
    };
    try {
      frame = JSON.parse(String(data));
    } catch {
      ws.close(CLOSE.badMessage, "Frames must be JSON");
      return;
    }
    if (frame.type === "ping") return send(ws, { type: "pong" });
    const id = typeof frame.id === "string" ? frame.id : undefined;
    if (frame.type !== "chat") {
      return send(ws, { type: "error", id, status: 400, error: "type must be chat or ping" });
    }
    const message = typeof frame.message === "string" ? frame.message.trim() : "";
    if (!message) return send(ws, { type: "error", id, status: 400, error: "message is required" });
    const sessionId = typeof frame.sessionId === "string" ? frame.sessionId : undefined;
    // Optional: one of the user's agents (404 otherwise); default their first agent.
    const agentId = typeof frame.agentId === "string" ? frame.agentId : undefined;
    if (pending >= MAX_PENDING_TURNS) {
      return send(ws, {
        type: "error",
        id,
        status: 429,
        error: `Too many pending turns: at most ${MAX_PENDING_TURNS} per socket`,
      });
    }
    pending++;
    queue = queue.then(async () => {
      try {
        if (revoked || ws.readyState !== WebSocket.OPEN) return;
        // Every turn asks again (the watch closes the socket, this keeps a turn from starting in
        // the moment before it does).
        if (!(await mayStillUse(credential, target))) return revoke();
        // The same budget as POST /api/agent and /api/chat (60 turns a minute per user).
        const decision = await consume("chat", `user:${userId}`);
        if (!decision.allowed) {
          send(ws, { type: "error", id, status: 429, error: "Too many requests: 60 per minute" });
          return;
        }
        const result = await chat(
          userId,
          { message, ...(sessionId ? { sessionId } : {}), ...(agentId ? { agentId } : {}) },
          {
            onDelta: (text) => send(ws, { type: "delta", id, text }),
            onEvent: (event, payload) => send(ws, { type: "event", id, event, payload }),
          },
          // An open socket can wait for a whole first start (the page says it is waiting); an
          // HTTP request keeps AGENT_CHAT_START_WAIT_MS.
          { startWaitMs: env().AGENT_LIVE_START_WAIT_MS, personId: credential.userId },
        );
        send(ws, { type: "final", id, ...result });
      } catch (error) {
        // A database away (restarting, failing over) is 503 and can be retried, as on HTTP
        // (decision 0223); the soak met 500 frames while PostgreSQL restarted.
        const away = !(error instanceof DomainError) && isDatabaseUnavailable(error);
        const status = error instanceof DomainError ? error.status : away ? 503 : 500;
        if (status === 500) logger().error({ err: error }, "live socket chat failed");
        send(ws, {
          // What the answer adds (a turn's `delivered: true`: its message reached the agent).
          ...(error instanceof DomainError ? error.extra : undefined),
          type: "error",
          id,
          status,
          error: away
            ? DATABASE_UNAVAILABLE
            : status === 500
              ? "Internal server error"
              : (error as Error).message,
        });
      } finally {
        pending--;
      }
    });
  });
}

/** Handles upgrades to /agent/<user_id> on the web server; other upgrade paths are refused. */
export function attachLiveSocket(server: Server): void {
  server.on("upgrade", liveSocketUpgrade);
}

/** One upgrade: /agent/<user_id> is served, any other path answered 404. */
export function liveSocketUpgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
  // A client that resets its connection while it is admitted is not the process's error.
  socket.on("error", () => socket.destroy());
  const pathname = (req.url ?? "/").split("?")[0] ?? "/";
  const match = PATH.exec(pathname);
  if (!match) {
    socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n");
    return;
  }
  let pathUserId: string;
  try {
    pathUserId = decodeURIComponent(match[1] as string);
  } catch {
    socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
    return;
  }
  admit(req, pathUserId).then(
    (verdict) => {
      if (socket.destroyed) return; // the client left while it was admitted
      if ("code" in verdict) {
        // Accept first, then close with the code: browsers only see close codes, not HTTP
        // statuses of a refused upgrade.
        wss.handleUpgrade(req, socket, head, (ws) => ws.close(verdict.code, verdict.reason));
        return;
      }
      // Counted per person: an organisation's members do not share one budget.
      const cap = env().LIVE_SOCKETS_PER_USER;
      const release = slots.take({ key: verdict.credential.userId, cap });
      if (!release) {
        // Before the upgrade: the cap protects the process's memory and descriptors, so no
        // WebSocket is made for a refusal (a browser sees the connection fail).
        refuseUpgrade(socket, 429, `Too many open live sockets: at most ${cap} per user`, {
          "Retry-After": "5",
        });
        return;
      }
      socket.once("close", release);
      wss.handleUpgrade(req, socket, head, (ws) => serve(ws, verdict.credential, verdict.ownerId));
    },
    (error: unknown) => {
      logger().error({ err: error }, "live socket admission failed");
      socket.end("HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\n\r\n");
    },
  );
}
