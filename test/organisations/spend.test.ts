import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as agentRoute from "../../app/routes/api.agent.ts";
import * as spendRoute from "../../app/routes/api.organizations.$id.spend.ts";
import * as usagePage from "../../app/routes/organizations.$id_.usage.tsx";
import type { InstanceRow } from "../../app/server/agents/instances.server.ts";
import { reserve } from "../../app/server/ai/budgets.server.ts";
import {
  flushMetering,
  meter as meterCall,
  type UsageRecord,
} from "../../app/server/ai/metering.server.ts";
import { startTurn } from "../../app/server/ai/turns.server.ts";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import {
  addMember,
  createOrganisation,
} from "../../app/server/organisations/organisations.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { createFakeGateway, pairedInstanceAt } from "../agents/fake-gateway.ts";
import { giveCredits } from "../ai/support.ts";
import { call } from "../helpers/api.ts";
import { page } from "../helpers/pages.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// Spend by member and by agent (issue 48, decision 0215): a gateway's model calls carry only
// its instance token, so each is attributed to the person and agent of the platform's chat turn
// running on that instance; the report sums the organisation's calls and the credits the ledger
// took for them, by member and by agent, over a period. The gateway is the protocol fake; its
// model call is metered while the fake holds the turn open, as the AI endpoint would.

const fake = createFakeGateway();
const OWNER = "usr_sp_owner";
const MEMBER = "usr_sp_member";
const VIEWER = "usr_sp_viewer";
const STRANGER = "usr_sp_stranger";
const AGENT_A = "agt_sp_a";
const AGENT_B = "agt_sp_b";
let org: string;
let instance: InstanceRow;

const as = async (userId: string, organisationId?: string) => ({
  cookie: await sessionCookieFor(userId),
  ...(organisationId ? { "x-organization": organisationId } : {}),
});

/** A call of the organisation's gateway, as the AI endpoint meters it. */
const gatewayCall = (costMicroUsd: number): UsageRecord => ({
  userId: org,
  instanceId: instance.id,
  endpoint: "agents",
  provider: "openai",
  model: "openai/gpt-4o-mini",
  promptTokens: 10,
  completionTokens: 5,
  tokensEstimated: false,
  costMicroUsd,
  billingMode: "credits",
  stream: false,
  latencyMs: 3,
  status: "ok",
  httpStatus: 200,
  error: null,
});

/** Meters the call as the AI endpoint does: against a hold on the organisation's credits. */
async function meter(record: UsageRecord) {
  return meterCall(record, await reserve(org, record.costMicroUsd, "credits"));
}

async function meteredRow(id: string | undefined) {
  const [row] = await db()<{ acting_user_id: string | null; agent_id: string | null }[]>`
    select acting_user_id, agent_id from ai_usage where id = ${id ?? ""}`;
  return row;
}

const spend = async (who: string, query = "") =>
  call(spendRoute, `/api/organizations/${org}/spend${query}`, {
    params: { id: org },
    headers: await as(who),
  });

beforeAll(async () => {
  process.env.AGENT_PROVISION_WAIT_MS = "0";
  resetEnvCache();
  for (const id of [OWNER, MEMBER, VIEWER, STRANGER]) await ensureUser(id);
  ({
    organisation: { id: org },
  } = await createOrganisation(OWNER, "Spend Co"));
  await assignPlan(org, "network", "usr_sp_operator");
  await addMember(org, OWNER, { email: `${MEMBER}@example.com`, role: "member" });
  await addMember(org, OWNER, { email: `${VIEWER}@example.com`, role: "viewer" });
  for (const [id, name, at] of [
    [AGENT_A, "Support bot", "2026-01-01T00:00:00Z"],
    [AGENT_B, "Sales bot", "2026-01-02T00:00:00Z"],
  ] as const) {
    await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier, created_at)
      values (${id}, ${org}, ${name}, ${id.replaceAll("_", "-")}, 'openai/gpt-4o-mini',
        'starter', ${at})`;
  }
  instance = await pairedInstanceAt(org);
  await giveCredits(org, 10_000_000);
});
beforeEach(() => {
  fake.use();
  fake.state.agents.add("agt-sp-a");
  fake.state.agents.add("agt-sp-b");
});
afterAll(() => closeGatewayClients());

describe("attribution of a gateway's calls", () => {
  it("names the member and the agent of the turn a call was made in", async () => {
    fake.state.hold = true;
    const turn = call(agentRoute, "/api/agent", {
      method: "POST",
      body: { message: "what is our refund policy?" },
      headers: await as(MEMBER, org),
    });
    // The turn runs on the gateway (its end held): the gateway's model call comes in now.
    await expect.poll(() => fake.state.held.length, { timeout: 10_000 }).toBe(1);
    const during = await meter(gatewayCall(400_000));
    fake.state.hold = false;
    fake.state.held.shift()?.();
    expect((await turn).status).toBe(200);
    await flushMetering();
    expect(await meteredRow(await during)).toEqual({
      acting_user_id: MEMBER,
      agent_id: AGENT_A,
    });
  });

  it("leaves a call no single turn explains unattributed, and names what is certain", async () => {
    // No turn on the instance (a chat-channel message, a heartbeat): the earlier test's turn is
    // made an hour old, past the window a turn explains calls in.
    await db()`update ai_turns set started_at = started_at - interval '1 hour'`;
    const alone = await meter(gatewayCall(100_000));
    await flushMetering();
    expect(await meteredRow(await alone)).toEqual({ acting_user_id: null, agent_id: null });

    // Two people's turns with the same agent at once: the agent is certain, the person is not.
    const endOwner = await startTurn({
      instanceId: instance.id,
      agentId: AGENT_B,
      personId: OWNER,
    });
    const endMember = await startTurn({
      instanceId: instance.id,
      agentId: AGENT_B,
      personId: MEMBER,
    });
    const both = await meter(gatewayCall(200_000));
    await flushMetering();
    await endOwner();
    await endMember();
    expect(await meteredRow(await both)).toEqual({ acting_user_id: null, agent_id: AGENT_B });
  });
});

describe("GET /api/organizations/:id/spend", () => {
  it("sums cost and credits by member and by agent, exactly", async () => {
    const res = await spend(OWNER);
    expect(res.status).toBe(200);
    const day = new Date().toISOString().slice(0, 10);
    expect(res.json.period).toEqual({ from: `${day.slice(0, 8)}01`, to: day });
    expect(res.json.total).toEqual({
      calls: 3,
      costMicroUsd: 700_000,
      creditsMicroUsd: 700_000,
    });
    expect(res.json.members).toEqual([
      {
        userId: MEMBER,
        name: expect.any(String),
        email: `${MEMBER}@example.com`,
        member: true,
        calls: 1,
        costMicroUsd: 400_000,
        creditsMicroUsd: 400_000,
      },
      {
        userId: null,
        name: null,
        email: null,
        member: false,
        calls: 2,
        costMicroUsd: 300_000,
        creditsMicroUsd: 300_000,
      },
    ]);
    expect(res.json.agents).toEqual([
      {
        agentId: AGENT_A,
        name: "Support bot",
        calls: 1,
        costMicroUsd: 400_000,
        creditsMicroUsd: 400_000,
      },
      {
        agentId: AGENT_B,
        name: "Sales bot",
        calls: 1,
        costMicroUsd: 200_000,
        creditsMicroUsd: 200_000,
      },
      { agentId: null, name: null, calls: 1, costMicroUsd: 100_000, creditsMicroUsd: 100_000 },
    ]);
    // The same ledger the balance follows.
    const [ledger] = await db()<{ spent: string }[]>`
      select -sum(amount_micro_usd)::bigint as spent from credit_ledger
      where user_id = ${org} and amount_micro_usd < 0`;
    expect(Number(ledger?.spent)).toBe(700_000);
  });

  it("counts only the period's days, and refuses a reversed or over-long one", async () => {
    const empty = await spend(MEMBER, "?from=2025-01-01&to=2025-01-31");
    expect(empty.status).toBe(200);
    expect(empty.json).toMatchObject({
      total: { calls: 0, costMicroUsd: 0, creditsMicroUsd: 0 },
      members: [],
      agents: [],
    });
    expect((await spend(OWNER, "?from=2026-02-01&to=2026-01-01")).status).toBe(400);
    const long = await spend(OWNER, "?from=2024-01-01&to=2025-12-31");
    expect(long.status).toBe(400);
    expect(long.json.error).toMatch(/at most 366 days/);
    expect((await spend(OWNER, "?from=2026-02-30")).status).toBe(400);
  });

  it("is for billing.read: a viewer gets 403, a stranger 404", async () => {
    expect((await spend(VIEWER)).status).toBe(403);
    expect((await spend(STRANGER)).status).toBe(404);
  });

  it("shows the same report on the organisation's usage page", async () => {
    const res = await page(usagePage, `/organizations/${org}/usage`, await as(MEMBER), undefined, {
      id: org,
    });
    expect(res.status).toBe(200);
    const body = res.body as { report: { total: { calls: number } }; error: string | null };
    expect(body.report.total.calls).toBe(3);
    expect(body.error).toBeNull();
    const viewer = await page(
      usagePage,
      `/organizations/${org}/usage`,
      await as(VIEWER),
      undefined,
      {
        id: org,
      },
    );
    expect(viewer.status).toBe(403);
  });
});
