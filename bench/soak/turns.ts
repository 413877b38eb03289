import { randomBytes } from "node:crypto";
import WebSocket from "ws";
import { call, ok } from "./http.ts";
import type { Recorder } from "./record.ts";
import type { SoakUser } from "./users.ts";

// Chat turns, each carrying a token of its own (and the usage the stand-in is to report), kept
// with what the platform answered: accepted (2xx, or a socket turn whose reply started), refused
// (an error answer), delivered (an error answer saying the agent had taken the message: in its
// conversation unless the gateway died before keeping it), or unknown (the connection failed or
// timed out: either may be true).

export interface Turn {
  token: string;
  userId: string;
  agentId: string | undefined;
  kind: string;
  at: number;
  verdict: "accepted" | "refused" | "delivered" | "unknown";
}

export const turns: Turn[] = [];
// The documented bounds plus a margin: a chat waits for a starting agent (HTTP:
// AGENT_CHAT_START_WAIT_MS, 120 s; the live socket: AGENT_LIVE_START_WAIT_MS, 600 s), then a
// turn has CHAT_TIMEOUT_MS (120 s).
const CHAT_TIMEOUT_MS = 250_000;
const SOCKET_TURN_TIMEOUT_MS = 730_000;

/** An error answer's verdict by its `delivered`: true, "unknown" (sent, unanswered), or refused. */
const verdictOfError = (delivered: unknown): Turn["verdict"] =>
  delivered === true ? "delivered" : delivered === "unknown" ? "unknown" : "refused";

export const turnText = (token: string, usage: string) =>
  `soak turn ${token}: answer briefly. usage=${usage}`;

export async function chatHttp(
  rec: Recorder,
  base: string,
  user: SoakUser,
  usage = "30/20",
  kind = "chat-http",
) {
  const turn: Turn = {
    token: `t${randomBytes(5).toString("hex")}`,
    userId: user.id,
    agentId: user.agentId,
    kind,
    at: Date.now(),
    verdict: "unknown",
  };
  turns.push(turn);
  const a = await call(rec, kind, `${base}/api/agent`, {
    body: { message: turnText(turn.token, usage) },
    auth: user.auth,
    timeoutMs: CHAT_TIMEOUT_MS,
  });
  turn.verdict = ok(a)
    ? "accepted"
    : typeof a.outcome !== "number"
      ? "unknown"
      : verdictOfError(a.body.delivered);
  return a;
}

/** One live socket per user, reopened when the web drops it; one turn at a time on it. */
export class LiveSocket {
  private ws: WebSocket | undefined;
  private frames: Array<Record<string, unknown>> = [];
  private wake: Array<() => void> = [];
  private readonly base: string;
  private readonly user: SoakUser;
  constructor(base: string, user: SoakUser) {
    this.base = base;
    this.user = user;
  }

  private open(): Promise<WebSocket> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`${this.base.replace("http", "ws")}/agent/${this.user.id}`, {
        headers: { cookie: this.user.auth.cookie ?? "" },
      });
      const timer = setTimeout(() => {
        ws.terminate();
        reject(new Error("socket open timed out"));
      }, 30_000);
      ws.on("message", (data) => {
        const frame = JSON.parse(String(data)) as Record<string, unknown>;
        if (frame.type === "ready") {
          clearTimeout(timer);
          resolve(ws);
        }
        this.frames.push(frame);
        for (const w of this.wake.splice(0)) w();
      });
      const fail = (error: Error) => {
        clearTimeout(timer);
        if (this.ws === ws) this.ws = undefined;
        for (const w of this.wake.splice(0)) w();
        reject(error);
      };
      ws.on("error", fail);
      ws.on("close", () => fail(new Error("socket closed")));
    });
  }

  async chat(rec: Recorder, usage = "30/20"): Promise<Turn> {
    const turn: Turn = {
      token: `t${randomBytes(5).toString("hex")}`,
      userId: this.user.id,
      agentId: this.user.agentId,
      kind: "chat-ws",
      at: Date.now(),
      verdict: "unknown",
    };
    turns.push(turn);
    const at = Date.now();
    try {
      if (!this.ws || this.ws.readyState !== WebSocket.OPEN) this.ws = await this.open();
      const ws = this.ws;
      const from = this.frames.length;
      ws.send(
        JSON.stringify({ type: "chat", id: turn.token, message: turnText(turn.token, usage) }),
      );
      const deadline = Date.now() + SOCKET_TURN_TIMEOUT_MS;
      for (;;) {
        const mine = this.frames.slice(from).filter((f) => f.id === turn.token);
        const end = mine.find((f) => f.type === "final" || f.type === "error");
        if (end?.type === "final") {
          turn.verdict = "accepted";
          rec.add("chat-ws", at, 200);
          return turn;
        }
        if (end?.type === "error") {
          // A reply that had started is a turn the platform accepted, whatever ended it.
          const started = mine.some((f) => f.type === "delta" || f.type === "event");
          turn.verdict = started ? "accepted" : verdictOfError(end.delivered);
          rec.add("chat-ws", at, Number(end.status ?? 500));
          return turn;
        }
        if (this.ws !== ws || Date.now() > deadline) {
          const started = mine.some((f) => f.type === "delta" || f.type === "event");
          if (started) turn.verdict = "accepted";
          rec.add("chat-ws", at, Date.now() > deadline ? "timeout" : "network");
          return turn;
        }
        await new Promise<void>((r) => {
          this.wake.push(r);
          setTimeout(r, 1000);
        });
      }
    } catch {
      rec.add("chat-ws", at, "network");
      return turn;
    }
  }

  close() {
    this.ws?.terminate();
  }
}
