import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as invitationsRoute from "../../app/routes/api.organizations.$id.invitations.ts";
import * as memberRoute from "../../app/routes/api.organizations.$id.members.$userId.ts";
import * as membersRoute from "../../app/routes/api.organizations.$id.members.ts";
import * as seatsRoute from "../../app/routes/api.organizations.$id.seats.ts";
import { getUser } from "../../app/server/accounts/users.server.ts";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import {
  opsUserDetail,
  setOrganisationSeatsAsOperator,
} from "../../app/server/ops/users.server.ts";
import {
  acceptInvitation,
  inviteMember,
} from "../../app/server/organisations/invitations.server.ts";
import { createOrganisation } from "../../app/server/organisations/organisations.server.ts";
import { withAuditScope } from "../../app/server/platform/audit.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { randomToken, sha256 } from "../../app/server/platform/ids.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { call } from "../helpers/api.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// Seats (issue 48, decision 0204): a seat is a member whose role may use the organisation's
// agents (owner, admin, member). The plan gives one plus its extra gateway seats (solo 1,
// collective 2, label 4, network unlimited; no plan 1), operators give more in /ops, and a new
// seat over the limit (an invitation, a direct add, a role change, an acceptance) is 402.

const OWNER = "usr_seat_owner";
const A = "usr_seat_a";
const B = "usr_seat_b";
const C = "usr_seat_c";
const OPERATOR = "usr_seat_operator";
const emailOf = (id: string) => `${id}@example.com`;

let counter = 0;
async function organisation(plan?: "solo" | "collective" | "label" | "network") {
  const { organisation } = await createOrganisation(OWNER, `Seats ${++counter}`);
  if (plan) await assignPlan(organisation.id, plan, OPERATOR);
  return organisation.id;
}

const as = async (userId: string) => ({ cookie: await sessionCookieFor(userId) });

async function seats(org: string) {
  const res = await call(seatsRoute, `/api/organizations/${org}/seats`, {
    params: { id: org },
    headers: await as(OWNER),
  });
  expect(res.status).toBe(200);
  return res.json.seats;
}

const invite = async (org: string, who: string, role: string) =>
  call(invitationsRoute, `/api/organizations/${org}/invitations`, {
    method: "POST",
    params: { id: org },
    body: { email: emailOf(who), role },
    headers: await as(OWNER),
  });

const add = async (org: string, who: string, role: string) =>
  call(membersRoute, `/api/organizations/${org}/members`, {
    method: "POST",
    params: { id: org },
    body: { email: emailOf(who), role },
    headers: await as(OWNER),
  });

const changeRole = async (org: string, who: string, role: string) =>
  call(memberRoute, `/api/organizations/${org}/members/${who}`, {
    method: "PATCH",
    params: { id: org, userId: who },
    body: { role },
    headers: await as(OWNER),
  });

beforeAll(async () => {
  for (const id of [OWNER, A, B, C, OPERATOR]) await ensureUser(id);
});
beforeEach(() => resetRateLimiters());

describe("seats", () => {
  it("come from the organisation's plan: none 1, solo 1, collective 2, label 4, network unlimited", async () => {
    expect(await seats(await organisation())).toEqual({
      plan: "free",
      fromPlan: 1,
      extra: 0,
      paid: 0,
      limit: 1,
      used: 1,
      pending: 0,
    });
    expect((await seats(await organisation("solo"))).limit).toBe(1);
    expect((await seats(await organisation("collective"))).limit).toBe(2);
    expect((await seats(await organisation("label"))).limit).toBe(4);
    expect((await seats(await organisation("network"))).limit).toBeNull();
    // The payment processor's plan counts as a person's does (users.plan, kept by the webhooks).
    const paid = await organisation();
    await db()`update users set plan = 'label' where id = ${paid}`;
    expect(await seats(paid)).toMatchObject({ plan: "label", limit: 4 });
    // Members only see them.
    const res = await call(seatsRoute, `/api/organizations/${paid}/seats`, {
      params: { id: paid },
      headers: await as(A),
    });
    expect(res.status).toBe(404);
  });

  it("refuses a new seat over the limit with 402, for invitations, direct adds and role changes", async () => {
    const org = await organisation("collective"); // 2 seats: the owner and one more
    expect((await invite(org, A, "member")).status).toBe(201); // the pending one holds it
    const over = await invite(org, B, "admin");
    expect(over.status).toBe(402);
    expect(over.json.error).toMatch(
      /^Seat limit reached: this organisation has 2 seats \(its collective plan gives 2\); 1 member uses one and 1 pending invitation holds one\./,
    );
    expect((await add(org, B, "member")).status).toBe(402);
    // Viewers and billing managers take no seat.
    expect((await invite(org, B, "viewer")).status).toBe(201);
    expect((await add(org, C, "billing")).status).toBe(201);
    const promote = await changeRole(org, C, "member");
    expect(promote.status).toBe(402);
    expect(promote.json.error).toMatch(/has 2 seats/);
    expect(await seats(org)).toMatchObject({ limit: 2, used: 1, pending: 1 });
    // Freeing the held seat (the invitation replaced by a viewer's) lets the promotion through.
    expect((await invite(org, A, "viewer")).status).toBe(201);
    expect((await changeRole(org, C, "member")).status).toBe(200);
    expect(await seats(org)).toMatchObject({ used: 2, pending: 0 });
    // A seat-holder's role change between seat roles takes no new one.
    expect((await changeRole(org, C, "admin")).status).toBe(200);
  });

  it("checks an acceptance against the seats left when it is accepted", async () => {
    const org = await organisation("collective");
    const invitation = await inviteMember(org, OWNER, { email: emailOf(A), role: "member" });
    // The mail's token is not readable here: give the invitation a known one.
    const token = randomToken(32);
    await db()`update organisation_invitations set token_hash = ${sha256(token)}
      where id = ${invitation.id}`;
    await assignPlan(org, "solo", OPERATOR); // downgraded meanwhile: 1 seat, the owner's
    const person = (await getUser(A))!;
    await expect(acceptInvitation(token, person)).rejects.toMatchObject({
      status: 402,
      message: expect.stringMatching(/has 1 seat \(its solo plan gives 1\)/),
    });
    await assignPlan(org, "collective", OPERATOR);
    await expect(acceptInvitation(token, person)).resolves.toMatchObject({ role: "member" });
  });

  it("lets only one of two concurrent claims take the last seat", async () => {
    const org = await organisation("collective");
    const results = await Promise.allSettled([
      inviteMember(org, OWNER, { email: emailOf(A), role: "member" }),
      inviteMember(org, OWNER, { email: emailOf(B), role: "member" }),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    expect(results.find((r) => r.status === "rejected")).toMatchObject({
      reason: { status: 402 },
    });
  });

  it("grows by the seats an operator gives in /ops, audited on the organisation", async () => {
    const org = await organisation("solo");
    expect((await invite(org, A, "member")).status).toBe(402);
    const given = await withAuditScope(
      { actor: { type: "operator", id: OPERATOR, userId: OPERATOR } },
      () => setOrganisationSeatsAsOperator(OPERATOR, org, 2),
    );
    expect(given).toEqual({ plan: "solo", fromPlan: 1, extra: 2, paid: 0, limit: 3 });
    expect((await invite(org, A, "member")).status).toBe(201);
    expect((await invite(org, B, "member")).status).toBe(201);
    const over = await invite(org, C, "member");
    expect(over.status).toBe(402);
    expect(over.json.error).toMatch(
      /has 3 seats \(its solo plan gives 1, plus 2 given by the operator\)/,
    );
    expect((await opsUserDetail(org)).seats).toMatchObject({ limit: 3, extra: 2, pending: 2 });
    expect((await opsUserDetail(OWNER)).seats).toBeNull();
    const [entry] = await db()`
      select actor_type, actor_id, details from audit_log
      where user_id = ${org} and action = 'seats.changed'`;
    expect(entry).toEqual({
      actor_type: "operator",
      actor_id: OPERATOR,
      details: { from: 0, to: 2 },
    });
    // Back to the plan's; a person has no seats to set; a negative count is refused.
    expect((await setOrganisationSeatsAsOperator(OPERATOR, org, 0)).limit).toBe(1);
    await expect(setOrganisationSeatsAsOperator(OPERATOR, OWNER, 1)).rejects.toMatchObject({
      status: 404,
    });
    await expect(setOrganisationSeatsAsOperator(OPERATOR, org, -1)).rejects.toMatchObject({
      status: 400,
    });
  });
});
