import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import { issueInstanceToken } from "../../app/server/ai/instance-tokens.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { startTurn } from "../../app/server/ai/turns.server.ts";
import { createOrganisation } from "../../app/server/organisations/organisations.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { agentsPatch } from "../../worker/instances/agents-patch.ts";
import { configureAi, giveCredits } from "../ai/support.ts";
import { call } from "../helpers/api.ts";
import { ensureUser } from "../helpers/users.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";

// Channel messages and heartbeats attributed to their agent (decision 0225): each agent's entry
// in the gateway config makes OpenClaw send the agent's id in the body of its model calls; the
// agents' endpoint takes it out before the provider sees the body, and the metering flush keeps
// it only for an agent of the token's owner. Through the real endpoint, the provider in msw.

const openai = createOpenAiFake();
const OWNER = "usr_hint_owner";
const MEMBER = "usr_hint_member";
const STRANGER = "usr_hint_stranger";
const AGENT_A = "agt_hint_a";
const AGENT_B = "agt_hint_b";
const FOREIGN = "agt_hint_foreign";
const INSTANCE = "ins_hint_org";
let org: string;
let token: string;

beforeAll(async () => {
  mswServer.use(...openai.handlers);
  await configureAi({ OPENAI_API_KEY: "test-key" });
  for (const id of [OWNER, MEMBER, STRANGER]) await ensureUser(id);
  org = (await createOrganisation(OWNER, "Hint Co")).organisation.id;
  for (const [id, owner, gatewayId] of [
    [AGENT_A, org, "main"],
    [AGENT_B, org, "agt-hint-b"],
    [FOREIGN, STRANGER, "main"],
  ] as const) {
    await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
      values (${id}, ${owner}, ${id}, ${gatewayId}, 'openai/gpt-4o-mini', 'starter')`;
  }
  await giveCredits(org, 1_000_000);
  token = await issueInstanceToken(org, INSTANCE);
});

beforeEach(() => {
  openai.state.calls = [];
});

/** A gateway's model call naming `agent` as the gateway config makes OpenClaw do. */
async function gatewayCall(agent: unknown) {
  const res = await call(completionsRoute, "/api/ai/v1/chat/completions", {
    method: "POST",
    body: {
      model: "openai/gpt-4o-mini",
      messages: [{ role: "user", content: "a channel message" }],
      ...(agent === undefined ? {} : { platform_agent: agent }),
    },
    headers: { authorization: `Bearer ${token}` },
  });
  expect(res.status).toBe(200);
  await flushMetering();
  const [row] = await db()<{ acting_user_id: string | null; agent_id: string | null }[]>`
    select acting_user_id, agent_id from ai_usage where user_id = ${org}
    order by created_at desc limit 1`;
  const sent = openai.state.calls.filter((c) => c.body !== undefined).at(-1)?.body;
  return { row, sent: sent as Record<string, unknown> | undefined };
}

describe("a gateway's call naming its agent", () => {
  it("is that agent's, with no person (a channel message or a heartbeat)", async () => {
    const { row, sent } = await gatewayCall(AGENT_A);
    expect(row).toEqual({ acting_user_id: null, agent_id: AGENT_A });
    // The provider never sees the field (OpenAI refuses unknown parameters).
    expect(sent).toBeDefined();
    expect(sent).not.toHaveProperty("platform_agent");
  });

  it("ignores another owner's agent and a malformed id, and still strips the field", async () => {
    for (const hint of [FOREIGN, "agt_no_such_agent", "not-an-agent", 42]) {
      const { row, sent } = await gatewayCall(hint);
      expect(row).toEqual({ acting_user_id: null, agent_id: null });
      expect(sent).not.toHaveProperty("platform_agent");
    }
  });

  it("takes the person from that agent's turn only", async () => {
    // A member chats with A while B answers a channel message.
    const end = await startTurn({ instanceId: INSTANCE, agentId: AGENT_A, personId: MEMBER });
    try {
      expect((await gatewayCall(AGENT_A)).row).toEqual({
        acting_user_id: MEMBER,
        agent_id: AGENT_A,
      });
      expect((await gatewayCall(AGENT_B)).row).toEqual({ acting_user_id: null, agent_id: AGENT_B });
      // Without the field, as before: the turn running explains the call.
      expect((await gatewayCall(undefined)).row).toEqual({
        acting_user_id: MEMBER,
        agent_id: AGENT_A,
      });
    } finally {
      await end();
    }
  });
});

describe("the agents' entries in the gateway config", () => {
  it("make each agent name itself, keeping the owner's own extra_body", () => {
    const rows = [
      { id: AGENT_A, gateway_agent_id: "main", name: "A", model: "openai/gpt-4o-mini" },
      {
        id: AGENT_B,
        gateway_agent_id: "agt-hint-b",
        name: "B",
        model: "openai/gpt-4o-mini",
        config: { params: { temperature: 0.2, extra_body: { top_k: 5, platform_agent: "x" } } },
      },
    ].map((a) => ({ config: {}, ...a })) as unknown as Parameters<typeof agentsPatch>[0];
    const patch = agentsPatch(rows, { model: null }, undefined);
    const entries = patch.agents.entries as Record<string, { params?: unknown }>;
    expect(entries.main?.params).toEqual({ extra_body: { platform_agent: AGENT_A } });
    expect(entries["agt-hint-b"]?.params).toEqual({
      temperature: 0.2,
      extra_body: { top_k: 5, platform_agent: AGENT_B },
    });
  });
});
