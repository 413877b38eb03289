import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import WebSocket from "ws";
import { createSession } from "../../app/server/accounts/sessions.server.ts";
import { attachLiveSocket } from "../../app/server/agents/live-socket.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { ensureUser } from "../helpers/users.ts";
import { pairedInstanceAt } from "./fake-gateway.ts";
import { uniqueUserId } from "./support.ts";

// The soak (issue 52) met live-socket turns answered `status: 500` while PostgreSQL restarted:
// the chat's queries failed with ECONNREFUSED on the database's port / CONNECTION_CLOSED. Over
// HTTP that is 503 "try again shortly" (decision 0223); the socket now says the same.

vi.mock("../../app/server/agents/talk.server.ts", () => ({
  chat: vi.fn(async () => {
    throw Object.assign(new Error("write CONNECTION_CLOSED 127.0.0.1:5432"), {
      code: "CONNECTION_CLOSED",
    });
  }),
}));

let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((_req, res) => res.writeHead(404).end());
  attachLiveSocket(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

it("a turn whose database went away ends with a 503 frame, not a 500", async () => {
  resetRateLimiters();
  const id = uniqueUserId("usr_live_db_away");
  await ensureUser(id);
  await pairedInstanceAt(id);
  const cookie = (await createSession(id)).setCookie.split(";")[0] as string;
  const ws = new WebSocket(`ws://${base}/agent/${id}`, { headers: { cookie } });
  const frames: Array<Record<string, unknown>> = [];
  ws.on("message", (data) => frames.push(JSON.parse(String(data))));
  try {
    await expect.poll(() => frames.some((f) => f.type === "ready")).toBe(true);
    ws.send(JSON.stringify({ type: "chat", id: "turn-1", message: "hello" }));
    await expect.poll(() => frames.find((f) => f.id === "turn-1")).toBeDefined();
    expect(frames.find((f) => f.id === "turn-1")).toMatchObject({
      type: "error",
      status: 503,
      error: "Database unavailable; try again shortly",
    });
  } finally {
    ws.terminate();
  }
});
