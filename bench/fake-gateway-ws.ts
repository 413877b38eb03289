import { createServer } from "node:http";
import WebSocket from "ws";

// A stand-in OpenClaw gateway for the live-socket bench, in its own process: the parts of the
// control protocol a chat turn uses (the connect challenge and hello, sessions.create,
// chat.send answered by a final chat event at once, an empty chat.history), so a turn costs the
// web what a real one does apart from the model's time. Any other method answers ok with {}.
const reply = process.env.FAKE_REPLY ?? "Hello from the stand-in gateway";
let sessions = 0;
const server = createServer((_req, res) => res.end("ok"));
new WebSocket.Server({ server, perMessageDeflate: false }).on("connection", (ws) => {
  const send = (frame: object) => ws.send(JSON.stringify(frame));
  send({ type: "event", event: "connect.challenge", payload: { nonce: "n", ts: Date.now() } });
  ws.on("message", (data: Buffer) => {
    const frame = JSON.parse(String(data)) as {
      id: string;
      method: string;
      params?: Record<string, unknown>;
    };
    const ok = (payload: unknown) => send({ type: "res", id: frame.id, ok: true, payload });
    switch (frame.method) {
      case "connect":
        ok({
          type: "hello-ok",
          protocol: 4,
          server: { version: "2026.9.6", connId: "bench" },
          auth: { role: "operator", scopes: frame.params?.scopes },
        });
        return;
      case "sessions.create":
        ok({ key: `agent:${String(frame.params?.agentId ?? "main")}:bench-${++sessions}` });
        return;
      case "chat.send": {
        const runId = frame.params?.idempotencyKey;
        ok({ runId });
        send({
          type: "event",
          event: "chat",
          payload: { runId, state: "final", message: { content: reply } },
        });
        return;
      }
      case "chat.history":
        ok({ messages: [] });
        return;
      default:
        ok({});
    }
  });
});
server.listen(Number(process.env.PORT), "127.0.0.1");
