import { beforeAll, describe, expect, it } from "vitest";
import * as memberRoute from "../../app/routes/api.organizations.$id.members.$userId.ts";
import * as ownershipRoute from "../../app/routes/api.organizations.$id.ownership.ts";
import * as organisationRoute from "../../app/routes/api.organizations.$id.ts";
import * as userRoute from "../../app/routes/api.user.ts";
import * as organisationPage from "../../app/routes/organizations.$id.tsx";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import { deleteUserAsOperator } from "../../app/server/ops/users.server.ts";
import {
  addMember,
  createOrganisation,
  membershipOf,
} from "../../app/server/organisations/organisations.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { getBoss } from "../../app/server/platform/jobs.server.ts";
import { call } from "../helpers/api.ts";
import { page } from "../helpers/pages.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// Ownerless organisations (decision 0214): an only owner's account deletion is refused with 409
// naming the organisations until ownership is transferred (API and page) or the organisation is
// deleted; an only owner cannot leave either.

const as = async (userId: string) => ({ cookie: await sessionCookieFor(userId) });

async function organisationOf(owner: string, name: string, members: Record<string, string>) {
  const {
    organisation: { id },
  } = await createOrganisation(owner, name);
  await assignPlan(id, "network", "usr_own_operator");
  for (const [userId, role] of Object.entries(members)) {
    await ensureUser(userId);
    await addMember(id, owner, { email: `${userId}@example.com`, role: role as "member" });
  }
  return id;
}

const deleteAccount = async (userId: string) =>
  call(userRoute, "/api/user", { method: "DELETE", headers: await as(userId) });

const transfer = async (by: string, org: string, userId: string) =>
  call(ownershipRoute, `/api/organizations/${org}/ownership`, {
    method: "POST",
    params: { id: org },
    body: { userId },
    headers: await as(by),
  });

beforeAll(async () => {
  for (const id of ["usr_own_a", "usr_own_b", "usr_own_c", "usr_own_operator"]) {
    await ensureUser(id);
  }
});

describe("an organisation keeps an owner", () => {
  it("refuses an only owner's account deletion until ownership is transferred", async () => {
    const org = await organisationOf("usr_own_a", "Handover Ltd", { usr_own_b: "member" });
    const refused = await deleteAccount("usr_own_a");
    expect(refused.status).toBe(409);
    expect(refused.json.error).toContain(`"Handover Ltd" (${org}): transfer its ownership`);
    expect(await db()`select 1 from users where id = 'usr_own_a'`).toHaveLength(1);
    // An operator's deletion is refused alike.
    await expect(deleteUserAsOperator("usr_own_operator", "usr_own_a")).rejects.toMatchObject({
      status: 409,
    });
    // Leaving (removing oneself) is refused too, pointing at the transfer.
    const left = await call(memberRoute, `/api/organizations/${org}/members/usr_own_a`, {
      method: "DELETE",
      params: { id: org, userId: "usr_own_a" },
      headers: await as("usr_own_a"),
    });
    expect(left.status).toBe(409);
    expect(left.json.error).toContain(`/api/organizations/${org}/ownership`);

    // Only an owner transfers; only to a member.
    expect((await transfer("usr_own_b", org, "usr_own_b")).status).toBe(403);
    expect((await transfer("usr_own_a", org, "usr_own_c")).status).toBe(404);
    expect((await transfer("usr_own_c", org, "usr_own_b")).status).toBe(404);

    const done = await transfer("usr_own_a", org, "usr_own_b");
    expect(done.status).toBe(200);
    expect((await membershipOf(org, "usr_own_b"))?.role).toBe("owner");
    expect((await membershipOf(org, "usr_own_a"))?.role).toBe("admin");
    const [entry] = await db()`select actor_id, target from audit_log
      where user_id = ${org} and action = 'ownership.transferred'`;
    expect(entry).toMatchObject({ actor_id: "usr_own_a", target: "usr_own_b" });

    expect((await deleteAccount("usr_own_a")).status).toBe(200);
    expect((await membershipOf(org, "usr_own_b"))?.role).toBe("owner");
  });

  it("asks an owner alone in an organisation to delete it, which tears its agents down", async () => {
    await ensureUser("usr_own_solo");
    const org = await organisationOf("usr_own_solo", "Solo Co", {});
    const refused = await deleteAccount("usr_own_solo");
    expect(refused.status).toBe(409);
    expect(refused.json.error).toContain(`"Solo Co" (${org}): delete it`);

    await ensureUser("usr_own_admin");
    await addMember(org, "usr_own_solo", { email: "usr_own_admin@example.com", role: "admin" });
    const byAdmin = await call(organisationRoute, `/api/organizations/${org}`, {
      method: "DELETE",
      params: { id: org },
      headers: await as("usr_own_admin"),
    });
    expect(byAdmin.status).toBe(403);

    // A live subscription would go on billing it: cancelled first.
    await db()`insert into subscriptions (id, user_id, stripe_customer_id, kind, item, price_id,
        status) values ('sub_own_solo', ${org}, 'cus_own', 'plan', 'solo', 'price_solo', 'active')`;
    const billed = await call(organisationRoute, `/api/organizations/${org}`, {
      method: "DELETE",
      params: { id: org },
      headers: await as("usr_own_solo"),
    });
    expect(billed.status).toBe(409);
    expect(billed.json.error).toMatch(/live subscription \(solo\)/);
    await db()`update subscriptions set status = 'canceled' where id = 'sub_own_solo'`;
    const deleted = await call(organisationRoute, `/api/organizations/${org}`, {
      method: "DELETE",
      params: { id: org },
      headers: await as("usr_own_solo"),
    });
    expect(deleted.status).toBe(200);
    expect(await db()`select 1 from users where id = ${org}`).toHaveLength(0);
    const jobs = await (await getBoss()).findJobs("teardown-instance", { data: { userId: org } });
    expect(jobs).toHaveLength(1);
    const [entry] = await db()`select target from audit_log
      where user_id = 'usr_own_solo' and action = 'organisation.deleted'`;
    expect(entry?.target).toBe(org);
    expect((await deleteAccount("usr_own_solo")).status).toBe(200);
  });

  it("lets a second owner's account go without a transfer", async () => {
    await ensureUser("usr_own_d");
    await ensureUser("usr_own_e");
    const org = await organisationOf("usr_own_d", "Two Owners", { usr_own_e: "owner" });
    expect((await deleteAccount("usr_own_d")).status).toBe(200);
    expect((await membershipOf(org, "usr_own_e"))?.role).toBe("owner");
  });

  it("transfers ownership from the organisation page", async () => {
    await ensureUser("usr_own_f");
    await ensureUser("usr_own_g");
    const org = await organisationOf("usr_own_f", "Page Handover", { usr_own_g: "member" });
    const shown = await page(
      organisationPage,
      `/organizations/${org}`,
      await as("usr_own_f"),
      undefined,
      {
        id: org,
      },
    );
    expect(shown.status).toBe(200);
    const res = await page(
      organisationPage,
      `/organizations/${org}`,
      await as("usr_own_f"),
      { intent: "transfer", userId: "usr_own_g" },
      { id: org },
    );
    expect(res.status).toBe(200);
    expect(JSON.stringify(res.body)).toContain("Ownership transferred");
    expect((await membershipOf(org, "usr_own_g"))?.role).toBe("owner");
    expect((await membershipOf(org, "usr_own_f"))?.role).toBe("admin");
  });
});
