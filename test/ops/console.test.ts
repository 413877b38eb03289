import { describe, expect, it } from "vitest";
import * as apiKeys from "../../app/routes/api.keys.ts";
import * as settings from "../../app/routes/api.settings.ts";
import * as apiUser from "../../app/routes/api.user.ts";
import * as opsIndex from "../../app/routes/ops._index.tsx";
import * as opsAuditExport from "../../app/routes/ops.audit.export.ts";
import * as opsAudit from "../../app/routes/ops.audit.tsx";
import * as opsInstances from "../../app/routes/ops.instances.tsx";
import * as opsJobs from "../../app/routes/ops.jobs.tsx";
import * as opsRequests from "../../app/routes/ops.requests.tsx";
import * as opsLayout from "../../app/routes/ops.tsx";
import * as opsUsers from "../../app/routes/ops.users._index.tsx";
import * as opsUser from "../../app/routes/ops.users.$id.tsx";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import { ensureInstanceRecord } from "../../app/server/agents/instances.server.ts";
import { requestAddOn } from "../../app/server/billing/add-ons.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { getBoss, sendJob } from "../../app/server/platform/jobs.server.ts";
import { as, newUser, signInUser, type TestUser } from "../accounts/helpers.ts";
import { subscribe } from "../agents/support.ts";
import { getPage, postPage } from "./support.ts";

// The operator console: who is an operator, 403 for everybody else on every page and action,
// suspension taking effect at once, and an audit entry (naming the operator) for each action.

const pages = [
  ["/ops", opsLayout.loader],
  ["/ops (overview)", opsIndex.loader],
  ["/ops/users", opsUsers.loader],
  ["/ops/users/:id", opsUser.loader],
  ["/ops/instances", opsInstances.loader],
  ["/ops/jobs", opsJobs.loader],
  ["/ops/requests", opsRequests.loader],
  ["/ops/audit", opsAudit.loader],
  ["/ops/audit/export", opsAuditExport.loader],
] as const;

const makeOperator = (u: TestUser) => db()`update users set is_operator = true where id = ${u.id}`;

async function auditOf(userId: string, action: string) {
  return db()<{ actor_type: string; actor_id: string; ip: string; outcome: string }[]>`
    select actor_type, actor_id, ip, outcome from audit_log
    where user_id = ${userId} and action = ${action} order by id`;
}

describe("operators", () => {
  it("the first account of a fresh install is an operator; later ones are not; OPERATOR_EMAILS adds more", async () => {
    expect(await db()`select 1 from users`).toHaveLength(0);
    const first = await newUser();
    const second = await newUser();
    const [a] = await db()`select is_operator from users where id = ${first.id}`;
    const [b] = await db()`select is_operator from users where id = ${second.id}`;
    expect(a!.is_operator).toBe(true);
    expect(b!.is_operator).toBe(false);
    expect((await getPage(opsUsers.loader, "/ops/users", first.cookie)).status).toBe(200);
    expect((await getPage(opsUsers.loader, "/ops/users", second.cookie)).status).toBe(403);

    process.env.OPERATOR_EMAILS = ` other@example.com, ${second.email.toUpperCase()} `;
    resetEnvCache();
    try {
      // A listed address counts once it is verified (test/ops/operator-emails.test.ts).
      expect((await getPage(opsUsers.loader, "/ops/users", second.cookie)).status).toBe(403);
      await db()`update users set email_verified = true where id = ${second.id}`;
      expect((await getPage(opsUsers.loader, "/ops/users", second.cookie)).status).toBe(200);
    } finally {
      delete process.env.OPERATOR_EMAILS;
      resetEnvCache();
    }
    // The public API has no way to make anyone an operator.
    const attempt = await as(second, settings, "/api/settings", {
      method: "PATCH",
      body: { name: "me", isOperator: true, is_operator: true },
    });
    expect([200, 400]).toContain(attempt.status);
    const [after] = await db()`select is_operator from users where id = ${second.id}`;
    expect(after!.is_operator).toBe(false);
  });

  it("every console page and action answers 403 to a non-operator and sends a stranger to sign in", async () => {
    const user = await newUser();
    const victim = await newUser();
    await ensureInstanceRecord(victim.id);
    for (const [name, loader] of pages) {
      const params = { id: victim.id };
      const denied = await getPage(loader, `/ops/users/${victim.id}`, user.cookie, params);
      expect(denied.status, name).toBe(403);
      const anonymous = await getPage(loader, `/ops/users/${victim.id}`, undefined, params);
      expect(anonymous.status, name).toBe(302);
      expect(anonymous.location, name).toMatch(/^\/signin\?redirectTo=/);
    }
    const actions = [
      [opsUser.action, { intent: "suspend", reason: "x" }],
      [opsUser.action, { intent: "unsuspend" }],
      [opsUser.action, { intent: "grant-operator" }],
      [opsUser.action, { intent: "revoke-operator" }],
      [opsUser.action, { intent: "delete", confirm: "yes" }],
      [opsUser.action, { intent: "assign-plan", plan: "network" }],
      [
        opsUser.action,
        {
          intent: "grant-credits",
          amount: "100",
          reason: "x",
          idempotencyKey: crypto.randomUUID(),
        },
      ],
      [opsInstances.action, { intent: "start", userId: victim.id }],
      [opsInstances.action, { intent: "stop", userId: victim.id }],
      [opsInstances.action, { intent: "repair", userId: victim.id }],
      [opsInstances.action, { intent: "update", userId: victim.id }],
      [opsJobs.action, { intent: "retry", name: "send-email", id: crypto.randomUUID() }],
      [opsRequests.action, { intent: "set-status", id: "srq_x", status: "done" }],
      [opsJobs.action, { intent: "cancel", name: "send-email", id: crypto.randomUUID() }],
    ] as const;
    for (const [action, fields] of actions) {
      const params = { id: victim.id };
      const denied = await postPage(action, "/ops/x", fields, user.cookie, params);
      expect(denied.status, fields.intent).toBe(403);
      const anonymous = await postPage(action, "/ops/x", fields, undefined, params);
      expect(anonymous.status, fields.intent).toBe(302);
    }
    // Nothing happened to the victim, and nobody became an operator.
    const [row] = await db()`select suspended_at, is_operator from users where id = ${victim.id}`;
    expect(row).toEqual({ suspended_at: null, is_operator: false });
    expect(await db()`select 1 from plan_assignments where user_id = ${victim.id}`).toHaveLength(0);
    expect(
      await db()`select 1 from credit_ledger where user_id = ${victim.id} and reason = 'grant'`,
    ).toHaveLength(0);
    const [self] = await db()`select is_operator from users where id = ${user.id}`;
    expect(self!.is_operator).toBe(false);
    expect(await db()`select 1 from audit_log where actor_type = 'operator'`).toHaveLength(0);
  });

  it("suspension ends a live session and refuses the user's API key at once; lifting it lets the key work again", async () => {
    const operator = await newUser();
    await makeOperator(operator);
    const user = await newUser();
    const key = (await as(user, apiKeys, "/api/keys", { method: "POST", body: { name: "k" } })).json
      .key as string;
    expect((await as(user, apiUser, "/api/user")).status).toBe(200);
    expect((await as({ key }, apiUser, "/api/user")).status).toBe(200);

    const params = { id: user.id };
    const suspended = await postPage(
      opsUser.action,
      `/ops/users/${user.id}`,
      { intent: "suspend", reason: "abuse report 42" },
      operator.cookie,
      params,
    );
    expect(suspended.status).toBe(303);
    expect((await as(user, apiUser, "/api/user")).status).toBe(401);
    expect((await as({ key }, apiUser, "/api/user")).status).toBe(401);
    expect((await signInUser(user.email, user.password)).status).toBe(403);
    const again = await postPage(
      opsUser.action,
      `/ops/users/${user.id}`,
      { intent: "suspend" },
      operator.cookie,
      params,
    );
    expect(again.status).toBe(409);

    const detail = await getPage(opsUser.loader, `/ops/users/${user.id}`, operator.cookie, params);
    expect(detail.body).toMatchObject({ user: { id: user.id, suspended: true } });

    const lifted = await postPage(
      opsUser.action,
      `/ops/users/${user.id}`,
      { intent: "unsuspend" },
      operator.cookie,
      params,
    );
    expect(lifted.status).toBe(303);
    expect((await as({ key }, apiUser, "/api/user")).status).toBe(200);
    // The old session stays ended; signing in works again.
    expect((await as(user, apiUser, "/api/user")).status).toBe(401);
    expect((await signInUser(user.email, user.password)).status).toBe(200);

    const entries = await auditOf(user.id, "user.suspended");
    expect(entries).toEqual([
      { actor_type: "operator", actor_id: operator.id, ip: "198.51.100.7", outcome: "success" },
    ]);
    expect(await auditOf(user.id, "user.unsuspended")).toHaveLength(1);
    const failed = await db()`select details from audit_log
      where user_id = ${user.id} and action = 'auth.signin' and outcome = 'failure'`;
    expect(failed.map((r) => r.details)).toEqual([{ method: "password", reason: "suspended" }]);
    const all = JSON.stringify(await db()`select * from audit_log`);
    for (const secret of [user.password, key, key.slice(3), operator.password]) {
      expect(all).not.toContain(secret);
    }
  });

  it("grants and revokes the operator role, refuses self-revocation and self-suspension, deletes accounts; all audited", async () => {
    const operator = await newUser();
    await makeOperator(operator);
    const other = await newUser();
    const post = (id: string, fields: Record<string, string>) =>
      postPage(opsUser.action, `/ops/users/${id}`, fields, operator.cookie, { id });

    expect((await post(other.id, { intent: "grant-operator" })).status).toBe(303);
    expect((await getPage(opsJobs.loader, "/ops/jobs", other.cookie)).status).toBe(200);
    expect((await post(other.id, { intent: "revoke-operator" })).status).toBe(303);
    expect((await getPage(opsJobs.loader, "/ops/jobs", other.cookie)).status).toBe(403);
    expect((await post(operator.id, { intent: "revoke-operator" })).status).toBe(400);
    expect((await post(operator.id, { intent: "suspend" })).status).toBe(400);
    expect((await post("usr_nobody", { intent: "suspend" })).status).toBe(404);
    expect((await post(other.id, { intent: "promote" })).status).toBe(400);

    // Deleting needs the confirm field.
    expect((await post(other.id, { intent: "delete" })).status).toBe(400);
    const deleted = await post(other.id, { intent: "delete", confirm: "yes" });
    expect(deleted.status).toBe(303);
    expect(deleted.location).toMatch(/^\/ops\/users\?notice=/);
    expect(await db()`select 1 from users where id = ${other.id}`).toHaveLength(0);
    const boss = await getBoss();
    expect(await boss.findJobs("teardown-instance", { data: { userId: other.id } })).toHaveLength(
      1,
    );

    const rows = await db()<{ action: string; actor_type: string; actor_id: string }[]>`
      select action, actor_type, actor_id from audit_log
      where user_id = ${other.id} and actor_type = 'operator' order by id`;
    expect(rows.map((r) => r.action)).toEqual([
      "operator.granted",
      "operator.revoked",
      "account.deleted",
    ]);
    expect(new Set(rows.map((r) => r.actor_id))).toEqual(new Set([operator.id]));
  });

  it("shows users, instances, queues, the overview and everyone's audit log to operators", async () => {
    const operator = await newUser({ name: "Olivia Operator" });
    await makeOperator(operator);
    const user = await newUser({ name: "Searchable Sam" });
    await subscribe(user.id, "solo");
    await createAgentRecord(user.id, { name: "a", model: "openai/gpt-4o-mini" });
    const instance = await ensureInstanceRecord(user.id);
    await db()`update instances set cpu_percent = 12.5, memory_bytes = ${300 * 1024 * 1024},
      sampled_at = now() where id = ${instance.id}`;

    const found = await getPage(opsUsers.loader, "/ops/users?q=searchable", operator.cookie);
    expect(found.body).toMatchObject({ users: [{ id: user.id, name: "Searchable Sam" }] });
    const instances = await getPage(opsInstances.loader, "/ops/instances", operator.cookie);
    const listed = (instances.body as { instances: { id: string }[] }).instances;
    expect(listed.find((i) => i.id === instance.id)).toMatchObject({
      ownerEmail: user.email,
      cpuPercent: 12.5,
      memoryBytes: 300 * 1024 * 1024,
    });
    const overview = await getPage(opsIndex.loader, "/ops", operator.cookie);
    expect(overview.body).toMatchObject({
      metrics: { users: expect.any(Number), agents: 1, instances: { total: listed.length } },
      pool: { size: 0, ready: 0, filling: 0 },
    });
    const audit = await getPage(opsAudit.loader, "/ops/audit", operator.cookie);
    const users = new Set(
      (audit.body as { entries: { userId: string }[] }).entries.map((e) => e.userId),
    );
    expect(users).toContain(user.id);
    expect(users).toContain(operator.id);
    const csv = await getPage(
      opsAuditExport.loader,
      "/ops/audit/export?format=csv",
      operator.cookie,
    );
    expect(csv.body).toContain(user.id);
    expect(csv.body).toContain(operator.id);
  });

  it("lists failed jobs with their error; retry and cancel go through pg-boss and are audited", async () => {
    const operator = await newUser();
    await makeOperator(operator);
    const boss = await getBoss();
    // No retries left, so failing it fails it for good.
    const failedId = await sendJob(
      "send-email",
      { to: "x@example.com", subject: "s", text: "t" },
      { retryLimit: 0 },
    );
    await boss.fail("send-email", failedId, new Error("SMTP said no"));
    const queues = await getPage(opsJobs.loader, "/ops/jobs", operator.cookie);
    const body = queues.body as {
      counts: { name: string; failed: number }[];
      failed: { id: string; error: string }[];
    };
    expect(body.counts.find((q) => q.name === "send-email")?.failed).toBe(1);
    expect(body.failed).toEqual([expect.objectContaining({ id: failedId, error: "SMTP said no" })]);

    const retried = await postPage(
      opsJobs.action,
      "/ops/jobs",
      { intent: "retry", name: "send-email", id: failedId },
      operator.cookie,
    );
    expect(retried.status).toBe(303);
    const [job] = await boss.findJobs("send-email", { id: failedId });
    expect(job?.state).toBe("retry");
    const cancelled = await postPage(
      opsJobs.action,
      "/ops/jobs",
      { intent: "cancel", name: "send-email", id: failedId },
      operator.cookie,
    );
    expect(cancelled.status).toBe(303);
    const [gone] = await boss.findJobs("send-email", { id: failedId });
    expect(gone?.state).toBe("cancelled");
    const again = await postPage(
      opsJobs.action,
      "/ops/jobs",
      { intent: "cancel", name: "send-email", id: failedId },
      operator.cookie,
    );
    expect(again.status).toBe(409);
    const entries = await db()`select action, actor_id, details from audit_log
      where target = ${failedId} order by id`;
    expect(entries).toEqual([
      { action: "job.retried", actor_id: operator.id, details: { queue: "send-email" } },
      { action: "job.cancelled", actor_id: operator.id, details: { queue: "send-email" } },
    ]);
  });

  it("assigns plans and grants credits through billing's services, once per form, audited", async () => {
    const operator = await newUser();
    await makeOperator(operator);
    const user = await newUser();
    const params = { id: user.id };
    const post = (fields: Record<string, string>) =>
      postPage(opsUser.action, `/ops/users/${user.id}`, fields, operator.cookie, params);

    expect((await post({ intent: "assign-plan", plan: "collective" })).status).toBe(303);
    expect((await post({ intent: "assign-plan", plan: "platinum" })).status).toBe(400);
    const detail = await getPage(opsUser.loader, `/ops/users/${user.id}`, operator.cookie, params);
    const page = detail.body as { assignedPlan: { plan: string }; grantKey: string };
    expect(page.assignedPlan.plan).toBe("collective");

    const grant = {
      intent: "grant-credits",
      amount: "12.5",
      reason: "goodwill",
      idempotencyKey: page.grantKey,
    };
    expect((await post(grant)).status).toBe(303);
    expect((await post(grant)).status).toBe(303); // the same form again: no second grant
    expect(
      (await post({ ...grant, amount: "1.234", idempotencyKey: crypto.randomUUID() })).status,
    ).toBe(400);
    const ledger = await db()`select amount_micro_usd, granted_by, note from credit_ledger
      where user_id = ${user.id} and reason = 'grant'`;
    expect(ledger).toEqual([
      { amount_micro_usd: 12_500_000, granted_by: operator.id, note: "goodwill" },
    ]);
    const after = await getPage(opsUser.loader, `/ops/users/${user.id}`, operator.cookie, params);
    expect(after.body).toMatchObject({
      credits: 12.5,
      ledger: [{ amountMicroUsd: 12_500_000, reason: "grant" }],
    });

    const entries = await db()<
      { action: string; actor_type: string; actor_id: string; details: unknown }[]
    >`
      select action, actor_type, actor_id, details from audit_log
      where user_id = ${user.id} and action in ('plan.changed', 'credits.changed') order by id`;
    expect(entries).toEqual([
      {
        action: "plan.changed",
        actor_type: "operator",
        actor_id: operator.id,
        details: expect.objectContaining({ item: "collective", source: "assigned" }),
      },
      {
        action: "credits.changed",
        actor_type: "operator",
        actor_id: operator.id,
        details: { reason: "grant", amountMicroUsd: 12_500_000, note: "goodwill" },
      },
    ]);
  });

  it("lists open add-on requests and moves them on, audited on the requester", async () => {
    const operator = await newUser();
    await makeOperator(operator);
    const user = await newUser();
    const { request } = await requestAddOn(user.id, "slack", "our workspace");
    const listed = await getPage(opsRequests.loader, "/ops/requests", operator.cookie);
    expect(listed.body).toMatchObject({ requests: [{ id: request.id, addon: "slack" }] });
    const moved = await postPage(
      opsRequests.action,
      "/ops/requests",
      { intent: "set-status", id: request.id, status: "done" },
      operator.cookie,
    );
    expect(moved.status).toBe(303);
    expect(
      (await getPage(opsRequests.loader, "/ops/requests", operator.cookie)).body,
    ).toMatchObject({
      requests: [],
    });
    const missing = await postPage(
      opsRequests.action,
      "/ops/requests",
      { intent: "set-status", id: "srq_nope", status: "done" },
      operator.cookie,
    );
    expect(missing.status).toBe(404);
    const [entry] = await db()`select actor_type, actor_id, target, details from audit_log
      where user_id = ${user.id} and action = 'service_request.updated'`;
    expect(entry).toEqual({
      actor_type: "operator",
      actor_id: operator.id,
      target: request.id,
      details: { addon: "slack", status: "done" },
    });
  });
});
