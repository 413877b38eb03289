import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from "vitest";
import * as agentRoute from "../../app/routes/api.agent.ts";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import {
  recordEngineCheck,
  recordEngineCpus,
} from "../../app/server/agents/engine-health.server.ts";
import type { InstanceRow } from "../../app/server/agents/instances.server.ts";
import { flushRecords } from "../../app/server/agents/talk.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { recordNodes } from "../../app/server/ops/nodes.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { configureAi } from "../ai/support.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { createFakeGateway, pairedInstanceAt } from "./fake-gateway.ts";
import { agentUser, asUser } from "./support.ts";

// Decision 0251: at most AGENT_TURNS_PER_CPU × the host's CPUs chat turns run at once on one
// engine host (a Swarm node), and one agent at most half of them; one more is refused at once
// with 503 and Retry-After, and nothing of it reaches the gateway. Three users' agents share one
// fake gateway whose runs are held open.

const fake = createFakeGateway();
type User = Awaited<ReturnType<typeof agentUser>>;
const users: User[] = [];
const instances: InstanceRow[] = [];

const chat = (user: User, message: string) =>
  asUser(user, agentRoute, "/api/agent", { method: "POST", body: { message } });
const sends = () => fake.state.calls.filter((c) => c.method === "chat.send").length;
const sent = (message: string) =>
  fake.state.calls.some((c) => c.method === "chat.send" && c.params.message === message);

beforeAll(async () => {
  process.env.AGENT_TURNS_PER_CPU = "2";
  resetEnvCache();
  await configureAi({ OPENAI_API_KEY: "test-key" });
  for (let i = 0; i < 3; i++) {
    const user = await agentUser("solo");
    await createAgentRecord(user.id, { name: `Bot ${i}`, model: "openai/gpt-4o-mini" });
    users.push(user);
    instances.push(await pairedInstanceAt(user.id));
  }
  // What the worker's engine check records: the engine answers and has one CPU (a budget of 2).
  await recordEngineCheck(true);
  await recordEngineCpus(1);
}, 120_000);
beforeEach(() => {
  fake.use();
  fake.state.hold = false;
  fake.state.calls.length = 0;
});
// A failed test's held runs end, so the next test starts with none in flight.
afterEach(() => {
  for (const end of fake.state.held.splice(0)) end();
});
afterAll(async () => {
  await flushRecords();
  closeGatewayClients();
  delete process.env.AGENT_TURNS_PER_CPU;
  resetEnvCache();
  await configureAi({});
});

/** Starts turns of `who` and waits until the gateway holds each one's run; later runs end. */
async function holdTurns(who: User[]) {
  fake.state.hold = true;
  const before = fake.state.held.length;
  const answers = who.map((u, i) => chat(u, `held turn ${i}`));
  await waitFor(async () => fake.state.held.length === before + who.length, {
    what: "the gateway holding the turns",
  });
  fake.state.hold = false;
  return answers;
}

it("refuses a turn past the host's budget at once, sending nothing, and admits it once one ends", async () => {
  const [a, b, c] = users as [User, User, User];
  const answers = await holdTurns([a, b]);

  const refused = await chat(c, "one turn too many");
  expect(refused.status).toBe(503);
  expect(refused.headers.get("retry-after")).toBe("5");
  expect(refused.json.error).toBe(
    "The agent's host is at its limit of 2 chat turns at once; nothing was sent to the agent. Try again in a few seconds",
  );
  expect(sent("one turn too many")).toBe(false);
  expect(sends()).toBe(2);

  // One run ends (whichever reached the gateway first): its answer comes, and the next turn
  // is admitted.
  fake.state.held.shift()?.();
  expect((await Promise.race(answers)).status).toBe(200);
  const admitted = await chat(c, "my turn now");
  expect(admitted.status).toBe(200);
  expect(sent("my turn now")).toBe(true);

  fake.state.held.shift()?.();
  for (const answer of answers) expect((await answer).status).toBe(200);
}, 120_000);

it("gives one agent at most half the host's turns: a tenant cannot keep the others out", async () => {
  const [a, b] = users as [User, User, User];
  const answers = await holdTurns([a]);
  // The host has room for one more, but not this agent (its share of a budget of 2 is 1).
  const second = await chat(a, "a second turn at once");
  expect(second.status).toBe(503);
  expect(second.headers.get("retry-after")).toBe("5");
  expect(second.json.error).toBe(
    "This agent already runs 1 chat turn at once, its share of its host; nothing was sent to the agent. Try again in a few seconds",
  );
  expect(sent("a second turn at once")).toBe(false);
  // Another tenant's agent still gets its turn.
  expect((await chat(b, "another tenant")).status).toBe(200);
  fake.state.held.shift()?.();
  for (const answer of answers) expect((await answer).status).toBe(200);
}, 120_000);

it("stops counting a turn whose web process died, after the turn's own bound", async () => {
  const [a, b, c] = users as [User, User, User];
  // A dead web's turn: started before the bound (120 s) and its grace, never ended.
  await db()`insert into ai_turns (id, instance_id, started_at)
    values ('trn_dead_web', ${instances[0]?.id as string}, now() - interval '4 minutes')`;
  const answers = await holdTurns([a]);
  expect((await chat(b, "second of two")).status).toBe(200);
  // A recent one without an end counts: the budget is full again with it.
  await db()`update ai_turns set started_at = now() - interval '1 minute' where id = 'trn_dead_web'`;
  expect((await chat(c, "third of two")).status).toBe(503);
  await db()`delete from ai_turns where id = 'trn_dead_web'`;
  fake.state.held.shift()?.();
  expect((await answers[0])?.status).toBe(200);
}, 120_000);

it("counts a Swarm node's turns apart from another node's, against that node's CPUs", async () => {
  const [a, b, c] = users as [User, User, User];
  const node = (id: string, placed: InstanceRow[]) => ({
    id,
    hostname: id,
    role: "worker",
    state: "ready",
    availability: "active",
    address: "192.0.2.1",
    memoryBytes: 8 * 1024 ** 3,
    nanoCpus: 1e9, // one CPU each: a budget of 2 per node
    reservedMemoryBytes: 0,
    reservedNanoCpus: 0,
    instances: placed.map((r) => ({ id: `svc-${r.id}`, instanceId: r.id, running: true })),
  });
  const [ia, ib, ic] = instances as [InstanceRow, InstanceRow, InstanceRow];
  await recordNodes([node("node-1", [ia, ib]), node("node-2", [ic])]);
  try {
    const answers = await holdTurns([a, b]);
    // node-1 is full; node-2 is not.
    expect((await chat(c, "on the other node")).status).toBe(200);
    await recordNodes([node("node-1", [ia, ib, ic]), node("node-2", [])]);
    expect((await chat(c, "moved to the full node")).status).toBe(503);
    for (const end of fake.state.held.splice(0)) end();
    for (const answer of answers) expect((await answer).status).toBe(200);
  } finally {
    await recordNodes([]);
  }
}, 120_000);

it("AGENT_TURNS_PER_CPU=0 turns the budget off", async () => {
  process.env.AGENT_TURNS_PER_CPU = "0";
  resetEnvCache();
  try {
    const [a, b, c] = users as [User, User, User];
    const answers = await holdTurns([a, b]);
    expect((await chat(c, "no budget")).status).toBe(200);
    for (const end of fake.state.held.splice(0)) end();
    for (const answer of answers) expect((await answer).status).toBe(200);
  } finally {
    process.env.AGENT_TURNS_PER_CPU = "2";
    resetEnvCache();
  }
}, 120_000);
