import { beforeAll, describe, expect, it } from "vitest";
import * as overviewRoute from "../../app/routes/api.organizations.$id.overview.ts";
import * as organisationPage from "../../app/routes/organizations.$id.tsx";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import {
  addMember,
  createOrganisation,
} from "../../app/server/organisations/organisations.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { call } from "../helpers/api.ts";
import { page } from "../helpers/pages.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// The mission-control view (issue 48, decision 0207): GET /api/organizations/:id/overview and
// the organisation page's section; and the page's branding form (members.manage only).

const OWNER = "usr_mc_owner";
const VIEWER = "usr_mc_viewer";
const BILLING = "usr_mc_billing";
const STRANGER = "usr_mc_stranger";
let org: string;

const as = async (userId: string) => ({ cookie: await sessionCookieFor(userId) });

let seq = 0;
async function usage(ownerId: string, costMicroUsd: number, at: Date) {
  await db()`insert into ai_usage (id, user_id, endpoint, provider, model, prompt_tokens,
      completion_tokens, cost_micro_usd, billing_mode, latency_ms, status, http_status, created_at)
    values (${`use_mc_${++seq}`}, ${ownerId}, 'agents', 'openai', 'openai/gpt-4o-mini', 10, 5,
      ${costMicroUsd}, 'credits', 3, 'ok', 200, ${at})`;
}

const overview = async (who: string) =>
  call(overviewRoute, `/api/organizations/${org}/overview`, {
    params: { id: org },
    headers: await as(who),
  });

beforeAll(async () => {
  for (const id of [OWNER, VIEWER, BILLING, STRANGER]) await ensureUser(id);
  ({
    organisation: { id: org },
  } = await createOrganisation(OWNER, "Control Co"));
  await addMember(org, OWNER, { email: `${VIEWER}@example.com`, role: "viewer" });
  await addMember(org, OWNER, { email: `${BILLING}@example.com`, role: "billing" });
  for (const [id, name] of [
    ["agt_mc_one", "Support bot"],
    ["agt_mc_two", "Sales bot"],
  ] as const) {
    await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
      values (${id}, ${org}, ${name}, ${id.replace("_", "-")}, 'openai/gpt-4o-mini', 'starter')`;
  }
  // One gateway runs all of an owner's agents: asleep while idle (decision 0164).
  await db()`insert into instances (id, user_id, container_name, volume_name,
      gateway_token_sealed, observed_state, desired_state)
    values ('ins_mc', ${org}, 'c', 'v', 'sealed', 'sleeping', 'running')`;
  const now = new Date();
  const thisMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1, 0, 0, 1));
  const lastMonth = new Date(thisMonth.getTime() - 2_000);
  await usage(org, 1_250_000, thisMonth);
  await usage(org, 250_000, now);
  await usage(org, 9_000_000, lastMonth); // last month: not counted
  await usage(OWNER, 7_000_000, now); // the owner's personal spend: not the organisation's
});

describe("mission-control view", () => {
  it("shows agents with status and wake, this month's spend and the audit log to audit.read", async () => {
    const res = await overview(BILLING);
    expect(res.status).toBe(200);
    expect(res.json.agents).toEqual([
      expect.objectContaining({
        id: "agt_mc_one",
        name: "Support bot",
        status: "sleeping",
        wake: "asleep",
      }),
      expect.objectContaining({
        id: "agt_mc_two",
        name: "Sales bot",
        status: "sleeping",
        wake: "asleep",
      }),
    ]);
    // Rows written without a turn to attribute them to: one unattributed line each way.
    const unattributed = { calls: 2, costMicroUsd: 1_500_000, creditsMicroUsd: 0 };
    expect(res.json.spend).toMatchObject({
      costMicroUsd: 1_500_000,
      calls: 2,
      perMember: [{ userId: null, ...unattributed }],
      perAgent: [{ agentId: null, ...unattributed }],
    });
    expect(res.json.members.map((m: { userId: string }) => m.userId).sort()).toEqual(
      [BILLING, OWNER, VIEWER].sort(),
    );
    const actions = (res.json.audit as Array<{ action: string }>).map((e) => e.action);
    expect(actions).toContain("organisation.created");
    expect(actions.filter((a) => a === "member.added")).toHaveLength(2);

    await db()`update instances set observed_state = 'running', health = 'healthy'
      where id = 'ins_mc'`;
    const awake = await overview(OWNER);
    expect(awake.json.agents[0]).toMatchObject({ status: "running", wake: "awake" });
    await db()`update instances set observed_state = 'sleeping' where id = 'ins_mc'`;
  });

  it("hides the audit log from a role without audit.read, and the organisation from a stranger", async () => {
    const viewer = await overview(VIEWER);
    expect(viewer.status).toBe(200);
    expect(viewer.json.audit).toBeNull();
    expect(viewer.json.spend.perMember).toBeNull(); // billing.read only
    expect(viewer.json.agents).toHaveLength(2);
    const stranger = await overview(STRANGER);
    expect(stranger.status).toBe(404);
    expect(stranger.json).toEqual({ error: "Organisation not found" });
  });

  it("is on the organisation page, with the spend in USD and no made-up per-member figure", async () => {
    const res = await page(organisationPage, `/organizations/${org}`, await as(OWNER), undefined, {
      id: org,
    });
    expect(res.status).toBe(200);
    const body = res.body as { overview: { spend: { costMicroUsd: number } }; branding: unknown };
    expect(body.overview.spend.costMicroUsd).toBe(1_500_000);
    expect(body.branding).toMatchObject({ available: false, plans: ["label", "network"] });
  });
});

describe("the organisation page's branding form", () => {
  const save = async (who: string, fields: Record<string, string>) =>
    page(
      organisationPage,
      `/organizations/${org}`,
      await as(who),
      { intent: "branding", ...fields },
      { id: org },
    );

  it("is refused with the plans needed, then saves on label; an empty field clears", async () => {
    const refused = await save(OWNER, { displayName: "Control" });
    expect(refused.status).toBe(402);
    expect(JSON.stringify(refused.body)).toContain("needs the label or network plan");

    await assignPlan(org, "label", "usr_mc_operator");
    const saved = await save(OWNER, {
      displayName: "Control Robotics",
      logoUrl: "https://cdn.control.example.com/logo.png",
      senderName: "",
    });
    expect(saved.status).toBe(200);
    const [row] = await db()`select display_name, logo_url, sender_name
      from organisation_branding where organisation_id = ${org}`;
    expect(row).toEqual({
      display_name: "Control Robotics",
      logo_url: "https://cdn.control.example.com/logo.png",
      sender_name: null,
    });
    const bad = await save(OWNER, { logoUrl: "http://cdn.control.example.com/logo.png" });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain("logoUrl: must be an https URL");
    const viewer = await save(VIEWER, { displayName: "Mine" });
    expect(viewer.status).toBe(403);
  });
});
