import { afterAll, beforeAll, beforeEach, expect, it } from "vitest";
import * as agentRoute from "../../app/routes/api.agent.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { configureAi } from "../ai/support.ts";
import { createFakeGateway, pairedInstanceAt } from "./fake-gateway.ts";
import { agentUser, asUser } from "./support.ts";

// A chat turn the gateway fails, through POST /api/agent against a protocol-level fake gateway:
// when the user has no model source at all (a fresh install without a provider key or a local
// model server), the 502 says what is missing, as the agent page does; otherwise it carries
// the gateway's error alone. The real gateway's turns: talk-real.test.ts.

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
beforeEach(() => fake.use());
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
