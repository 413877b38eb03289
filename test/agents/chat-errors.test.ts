import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, expect, it } from "vitest";
import WebSocket from "ws";
import * as agentRoute from "../../app/routes/api.agent.ts";
import { createSession } from "../../app/server/accounts/sessions.server.ts";
import { attachLiveSocket } from "../../app/server/agents/live-socket.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { configureAi } from "../ai/support.ts";
import { createFakeGateway, pairedInstanceAt } from "./fake-gateway.ts";
import { agentUser, asUser } from "./support.ts";

// A chat turn the gateway fails, through POST /api/agent against a protocol-level fake gateway:
// when the user has no model source at all (a fresh install without a provider key or a local
// model server), the 502 says what is missing, as the agent page does; otherwise it carries
// the gateway's error alone. A turn that failed after the gateway took its message says
// `delivered: true` (the message is in the agent's conversation: issue 52's soak saw such a 502
// recorded); one whose message was refused does not. The real gateway's turns: talk-real.test.ts.

const fake = createFakeGateway();
// What OpenClaw 2026.9.6 reports when the platform's endpoint has no model to serve the turn.
const NOT_FOUND =
  "The selected model was not found by the provider. Check the model id or choose a different model.";
let user: { id: string; cookie: string };

const send = (message: string) =>
  asUser(user, agentRoute, "/api/agent", { method: "POST", body: { message } });

beforeAll(async () => {
  user = await agentUser();
  await pairedInstanceAt(user.id);
});
beforeEach(() => {
  fake.state.refuseSend = undefined;
  fake.use();
});
afterAll(async () => {
  closeGatewayClients();
  await configureAi({});
});

it("says what is missing when nothing can serve the agent's model", async () => {
  await configureAi({}); // no provider key, no local server; the user has no key either
  fake.state.run = { error: NOT_FOUND };
  const res = await send("Hello?");
  expect(res.status).toBe(502);
  expect(res.json.error).toContain(NOT_FOUND);
  expect(res.json.error).toContain("No model source is set");
  expect(res.json.error).toContain("OPENAI_API_KEY");
  expect(res.json.error).not.toContain(".."); // the gateway's sentence ends with its own period
});

it("passes the gateway's error on as it is when a provider is configured", async () => {
  await configureAi({ OPENAI_API_KEY: "test-key" });
  fake.state.run = { error: NOT_FOUND };
  const res = await send("Hello again?");
  expect(res.status).toBe(502);
  expect(res.json.error).toBe(`Agent gateway error: chat: ERROR ${NOT_FOUND}`);

  fake.state.run = { reply: "Hi!" };
  const ok = await send("And now?");
  expect(ok.status).toBe(200);
  expect(ok.json.reply).toBe("Hi!");
});

it("says delivered when the turn failed after the gateway took the message, and not before", async () => {
  await configureAi({ OPENAI_API_KEY: "test-key" });
  fake.state.run = { error: "the model call failed" };
  const after = await send("Delivered, then failed");
  expect(after.status).toBe(502);
  expect(after.json).toEqual({
    error: "Agent gateway error: chat: ERROR the model call failed",
    delivered: true,
  });

  fake.state.refuseSend = { code: "INVALID_REQUEST", message: "session not writable" };
  const refused = await send("Never taken");
  expect(refused.status).toBe(502);
  expect(refused.json).toEqual({
    error: "Agent gateway error: chat.send: INVALID_REQUEST session not writable",
  });
});

it("says delivered in the live socket's error frame too", async () => {
  await configureAi({ OPENAI_API_KEY: "test-key" });
  fake.state.run = { error: "the model call failed" };
  const server = createServer((_req, res) => res.writeHead(404).end());
  attachLiveSocket(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const cookie = (await createSession(user.id)).setCookie.split(";")[0] as string;
  const ws = new WebSocket(`ws://127.0.0.1:${port}/agent/${user.id}`, { headers: { cookie } });
  const frames: Array<Record<string, unknown>> = [];
  ws.on("message", (data) => frames.push(JSON.parse(String(data))));
  try {
    await expect.poll(() => frames.some((f) => f.type === "ready")).toBe(true);
    ws.send(JSON.stringify({ type: "chat", id: "turn-1", message: "Delivered on the socket" }));
    const ended = () => frames.find((f) => f.id === "turn-1" && f.type !== "event");
    await expect.poll(ended).toBeDefined();
    expect(ended()).toEqual({
      type: "error",
      id: "turn-1",
      status: 502,
      error: "Agent gateway error: chat: ERROR the model call failed",
      delivered: true,
    });
  } finally {
    ws.terminate();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});
