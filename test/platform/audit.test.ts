import { describe, expect, it } from "vitest";
import * as agentRoute from "../../app/routes/api.agent.ts";
import * as agentConfig from "../../app/routes/api.agents.$id.config.ts";
import * as audit from "../../app/routes/api.audit.ts";
import * as keyById from "../../app/routes/api.keys.$id.ts";
import * as keys from "../../app/routes/api.keys.ts";
import * as sessionById from "../../app/routes/api.sessions.$id.ts";
import * as sessions from "../../app/routes/api.sessions.ts";
import * as password from "../../app/routes/api.settings.password.ts";
import * as settingsAudit from "../../app/routes/settings_.audit.tsx";
import { signInWithOAuth } from "../../app/server/accounts/oauth.server.ts";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import { userForWallet } from "../../app/server/identity/siwe.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { purgeAuditLog } from "../../worker/jobs/purge-audit-log.ts";
import {
  as,
  cookieOf,
  newUser,
  registerUser,
  signInUser,
  uniqueEmail,
} from "../accounts/helpers.ts";
import { verifyEmailByResetLink } from "../accounts/verify-email.ts";
import { subscribe } from "../agents/support.ts";
import { getPage } from "../ops/support.ts";

// The audit log: entries for the account actions, never a secret, append-only, retention.

const rowsOf = (userId: string) =>
  db()<Record<string, unknown>[]>`select * from audit_log where user_id = ${userId} order by id`;

describe("audit log", () => {
  it("records sign-ins, keys, sessions and password changes with actor and IP, never a secret", async () => {
    const u = await newUser();
    const failed = await signInUser(u.email, "wrong password", { remoteAddress: "203.0.113.9" });
    expect(failed.status).toBe(401);
    const second = await signInUser(u.email, u.password, { remoteAddress: "203.0.113.10" });
    const otherCookie = cookieOf(second);

    const created = await as(u, keys, "/api/keys", { method: "POST", body: { name: "ci" } });
    expect(created.status).toBe(201);
    const key = created.json.key as string;
    // Acting with the key: the entry names the key, not the user.
    const viaKey = await as({ key }, sessionById, "/api/sessions/x", {
      method: "DELETE",
      params: { id: "x" },
    });
    expect(viaKey.status).toBe(404);
    const listed = await as({ cookie: otherCookie }, sessions, "/api/sessions");
    const target = (listed.json.sessions as { id: string; current: boolean }[]).find(
      (s) => !s.current,
    )!;
    const revoked = await as({ key }, sessionById, `/api/sessions/${target.id}`, {
      method: "DELETE",
      params: { id: target.id },
      remoteAddress: "203.0.113.11",
    });
    expect(revoked.status).toBe(200);
    // u's first session is the one just revoked: go on with the second.
    const deleted = await as({ cookie: otherCookie }, keyById, `/api/keys/${created.json.id}`, {
      method: "DELETE",
      params: { id: created.json.id },
    });
    expect(deleted.status).toBe(200);
    expect((await signInUser(u.email, u.password)).status).toBe(200);
    const wrongCurrent = await as({ cookie: otherCookie }, password, "/api/settings/password", {
      method: "POST",
      body: { currentPassword: "nope nope nope", newPassword: "a brand new password" },
    });
    expect(wrongCurrent.status).toBe(400);
    const newPassword = "a brand new password";
    const changed = await as({ cookie: otherCookie }, password, "/api/settings/password", {
      method: "POST",
      body: { currentPassword: u.password, newPassword },
    });
    expect(changed.status).toBe(200);

    const rows = await rowsOf(u.id);
    const summary = rows.map((r) => [r.action, r.outcome, r.actor_type]);
    expect(summary).toEqual([
      ["account.created", "success", "user"], // sign-up signs in with the new account
      ["auth.signin", "failure", "system"],
      ["auth.signin", "success", "user"],
      ["api_key.created", "success", "user"],
      ["session.revoked", "success", "api_key"],
      ["api_key.deleted", "success", "user"],
      ["auth.signin", "success", "user"],
      ["password.changed", "failure", "user"],
      ["session.revoked", "success", "user"], // the other sessions, with the change
      ["password.changed", "success", "user"],
    ]);
    expect(rows[1]!.ip).toBe("203.0.113.9");
    expect(rows[2]!.ip).toBe("203.0.113.10");
    expect(rows[4]).toMatchObject({
      actor_id: created.json.id,
      ip: "203.0.113.11",
      target: target.id,
    });
    expect(rows[3]!.target).toBe(created.json.id);

    const text = JSON.stringify(await db()`select * from audit_log`);
    const sessionToken = decodeURIComponent(otherCookie.split("=")[1]!);
    for (const secret of [u.password, newPassword, key, key.slice(3), sessionToken]) {
      expect(text).not.toContain(secret);
    }
  });

  it("GET /api/audit pages the caller's own entries as JSON and exports CSV and JSON", async () => {
    const u = await newUser();
    const stranger = await newUser();
    for (const name of ["a", "b", "c"]) {
      await as(u, keys, "/api/keys", { method: "POST", body: { name } });
    }
    const first = await as(u, audit, "/api/audit?limit=2");
    expect(first.status).toBe(200);
    expect(first.json.entries.map((e: { action: string }) => e.action)).toEqual([
      "api_key.created",
      "api_key.created",
    ]);
    expect(first.json.entries[0].details).toEqual({ name: "c" });
    const second = await as(u, audit, `/api/audit?limit=2&before=${first.json.nextCursor}`);
    expect(second.json.entries.map((e: { action: string }) => e.action)).toEqual([
      "api_key.created",
      "account.created",
    ]);
    expect(second.json.nextCursor).toBeNull();
    const theirs = await as(stranger, audit, "/api/audit");
    expect(theirs.json.entries).toHaveLength(1);
    expect(theirs.json.entries[0].userId).toBe(stranger.id);

    const csv = await as(u, audit, "/api/audit?format=csv");
    expect(csv.headers.get("content-type")).toMatch(/^text\/csv/);
    expect(csv.headers.get("content-disposition")).toMatch(/attachment/);
    const lines = csv.text.trim().split("\r\n");
    expect(lines[0]).toBe("id,at,userId,actorType,actorId,ip,action,target,outcome,details");
    expect(lines).toHaveLength(5);
    expect(lines[1]).toContain('"api_key.created"');
    const download = await as(u, audit, "/api/audit?download=1");
    expect(download.json.entries).toHaveLength(4);

    expect((await as({}, audit, "/api/audit")).status).toBe(401);
    expect((await as(u, audit, "/api/audit?format=xml")).status).toBe(400);
    expect((await as(u, audit, "/api/audit?limit=0")).status).toBe(400);
  });

  it("is append-only: UPDATE, DELETE and TRUNCATE are refused", async () => {
    const u = await newUser();
    await expect(
      db()`update audit_log set outcome = 'failure' where user_id = ${u.id}`,
    ).rejects.toThrow(/append-only/);
    await expect(db()`delete from audit_log where user_id = ${u.id}`).rejects.toThrow(
      /append-only/,
    );
    await expect(db()`truncate audit_log`).rejects.toThrow(/append-only/);
    // Even with the purge flag, a row younger than 90 days stays.
    await expect(
      db().begin(async (tx) => {
        await tx`select set_config('audit.purge', 'on', true)`;
        await tx`delete from audit_log where user_id = ${u.id}`;
      }),
    ).rejects.toThrow(/append-only/);
    expect(await rowsOf(u.id)).toHaveLength(1);
  });

  it("the purge job keeps 90 days, a year for Audit Logs add-on holders", async () => {
    const plain = await newUser();
    const addOn = await newUser();
    await db()`
      insert into subscriptions (id, user_id, stripe_customer_id, kind, item, price_id, status)
      values ('sub_audit_test', ${addOn.id}, 'cus_test', 'addon', 'audit-logs', 'price_x', 'active')`;
    for (const [userId, days] of [
      [plain.id, 89],
      [plain.id, 91],
      [addOn.id, 91],
      [addOn.id, 364],
      [addOn.id, 366],
      [null, 91],
    ] as const) {
      await db()`
        insert into audit_log (at, user_id, actor_type, action, outcome, target)
        values (now() - make_interval(days => ${days}), ${userId}, 'system', 'credits.changed',
                'success', ${`old-${days}`})`;
    }
    const result = await purgeAuditLog();
    expect(result.purged).toBe(3);
    const left = await db()<{ user_id: string | null; target: string }[]>`
      select user_id, target from audit_log where target like 'old-%' order by target`;
    expect(left).toEqual([
      { user_id: addOn.id, target: "old-364" },
      { user_id: plain.id, target: "old-89" },
      { user_id: addOn.id, target: "old-91" },
    ]);
  });

  it("records OAuth and wallet linking, referral credits, agents provisioned and configured, credentials set", async () => {
    const u = await newUser();
    const [row] = await db()<{ code: string }[]>`
      select referral_code as code from users where id = ${u.id}`;
    const referredEmail = uniqueEmail("referred");
    const referred = await registerUser({ email: referredEmail, referralCode: row!.code });
    expect(referred.status).toBe(201);
    await verifyEmailByResetLink(referredEmail); // a referral pays once the email is proven

    await db()`update users set email_verified = true where id = ${u.id}`;
    await signInWithOAuth("oauth2", {
      providerAccountId: "g-123",
      email: u.email,
      emailVerified: true,
    });
    const wallet = await userForWallet("0x00000000000000000000000000000000000000aB");

    await subscribe(u.id, "solo");
    const agent = await createAgentRecord(u.id, { name: "audited", model: "openai/gpt-4o-mini" });
    const configured = await as(u, agentConfig, `/api/agents/${agent.id}/config`, {
      method: "PUT",
      params: { id: agent.id },
      body: { systemPrompt: "be brief" },
    });
    expect(configured.status).toBe(200);
    const tokenValue = "123456:AAtelegram-bot-secret";
    const credential = await as(u, agentRoute, "/api/agent", {
      method: "POST",
      body: { action: "set-credential", key: "chatapp1", value: tokenValue },
    });
    expect(credential.status).toBe(200);

    const actions = (await rowsOf(u.id)).map((r) => [r.action, r.target]);
    expect(actions).toEqual(
      expect.arrayContaining([
        ["credits.changed", referred.json.id],
        ["oauth.linked", "oauth2"],
        ["agent.provisioned", agent.id],
        ["agent.configured", agent.id],
        ["credentials.set", "chatapp1"],
      ]),
    );
    const referredRows = await rowsOf(referred.json.id);
    expect(referredRows.map((r) => r.action)).toContain("credits.changed");
    const walletRows = await rowsOf(wallet.user.id);
    expect(walletRows.map((r) => [r.action, r.target])).toContainEqual([
      "wallet.linked",
      wallet.address,
    ]);
    expect(JSON.stringify(await db()`select * from audit_log`)).not.toContain(
      "telegram-bot-secret",
    );
  });

  it("/settings/audit shows the signed-in user's own entries, paged, and sends strangers to sign in", async () => {
    const u = await newUser();
    const other = await newUser();
    await as(other, keys, "/api/keys", { method: "POST", body: { name: "theirs" } });
    const page = await getPage(settingsAudit.loader, "/settings/audit", u.cookie);
    const body = page.body as {
      entries: { userId: string; action: string }[];
      nextCursor: string | null;
    };
    expect(body.entries.map((e) => [e.userId, e.action])).toEqual([[u.id, "account.created"]]);
    expect(body.nextCursor).toBeNull();
    const anonymous = await getPage(settingsAudit.loader, "/settings/audit");
    expect(anonymous.status).toBe(302);
    expect(anonymous.location).toBe("/signin?redirectTo=%2Fsettings%2Faudit");
  });
});
