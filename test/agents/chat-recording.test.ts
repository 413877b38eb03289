import { afterAll, beforeAll, beforeEach, expect, it } from "vitest";
import * as agentRoute from "../../app/routes/api.agent.ts";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import { flushRecords } from "../../app/server/agents/talk.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { configureAi } from "../ai/support.ts";
import { createFakeGateway, pairedInstanceAt } from "./fake-gateway.ts";
import { agentUser, asUser } from "./support.ts";

// The web records a chat turn itself, without the worker's recorder: the soak lost every turn
// while the worker was stopped, because the gateway writes a turn to its history just after the
// run's final event and the web's one read came before it. The web reads again until the reply
// is there.

const fake = createFakeGateway();
let user: { id: string; cookie: string };
let agentId: string;

beforeAll(async () => {
  await configureAi({ OPENAI_API_KEY: "test-key" });
  user = await agentUser("solo");
  agentId = (await createAgentRecord(user.id, { name: "Bot", model: "openai/gpt-4o-mini" })).id;
  await pairedInstanceAt(user.id);
});
beforeEach(() => fake.use());
afterAll(async () => {
  closeGatewayClients();
  await configureAi({});
});

const recorded = async () =>
  (
    await db()<{ sender: string; content: string }[]>`
      select sender, content from agent_messages where agent_id = ${agentId}
      order by created_at, sender desc`
  ).map((m) => `${m.sender}: ${m.content}`);

it("records a turn the gateway's history holds only a moment after the reply", async () => {
  fake.state.run = { reply: "Noted." };
  fake.state.historyLag = 2; // two reads miss the turn
  const res = await asUser(user, agentRoute, "/api/agent", {
    method: "POST",
    body: { message: "Remember the blue door" },
  });
  expect(res.status).toBe(200);
  await flushRecords();
  expect(await recorded()).toEqual(["user: Remember the blue door", "agent: Noted."]);
  expect(fake.state.historyLag).toBe(0);
});
