import type { ParsedMail } from "mailparser";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as acceptRoute from "../../app/routes/api.invitations.accept.ts";
import * as invitationRoute from "../../app/routes/api.organizations.$id.invitations.$invitationId.ts";
import * as invitationsRoute from "../../app/routes/api.organizations.$id.invitations.ts";
import * as membersRoute from "../../app/routes/api.organizations.$id.members.ts";
import * as organisationsRoute from "../../app/routes/api.organizations.ts";
import * as registerRoute from "../../app/routes/api.register.ts";
import { createApiKey } from "../../app/server/accounts/api-keys.server.ts";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import { invitationPreview } from "../../app/server/organisations/invitations.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { sha256 } from "../../app/server/platform/ids.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { call } from "../helpers/api.ts";
import { startSmtpInbox } from "../helpers/smtp-inbox.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// Invitations by email (issue 48, decision 0204). The mail travels web → pg-boss → worker →
// nodemailer → a real SMTP server here, and its link's token is what the tests accept with.

let inbox: ParsedMail[] = [];
let smtp: Awaited<ReturnType<typeof startSmtpInbox>>;

const OWNER = "usr_inv_owner";
const ADMIN = "usr_inv_admin";
const COLLEAGUE = "usr_inv_colleague";
const OTHER = "usr_inv_other";
const STRANGER = "usr_inv_stranger";
const emailOf = (id: string) => `${id}@example.com`;

beforeAll(async () => {
  smtp = await startSmtpInbox();
  inbox = smtp.inbox;
  process.env.SMTP_URL = smtp.url;
  process.env.APP_URL = "http://app.test";
  resetEnvCache();
  for (const id of [OWNER, ADMIN, COLLEAGUE, OTHER, STRANGER]) await ensureUser(id);
  await startWorker();
});
beforeEach(() => resetRateLimiters());
afterAll(async () => {
  await stopWorker(5_000);
  await smtp.close();
  delete process.env.SMTP_URL;
  delete process.env.APP_URL;
  resetEnvCache();
});

const as = async (userId: string) => ({ cookie: await sessionCookieFor(userId) });

async function newOrganisation(name: string): Promise<string> {
  const res = await call(organisationsRoute, "/api/organizations", {
    method: "POST",
    body: { name },
    headers: await as(OWNER),
  });
  expect(res.status).toBe(201);
  const id = res.json.organisation.id as string;
  await assignPlan(id, "network", "usr_inv_operator"); // seats are seats.test.ts's
  return id;
}

async function invite(org: string, email: string, role: string, by = OWNER) {
  return call(invitationsRoute, `/api/organizations/${org}/invitations`, {
    method: "POST",
    params: { id: org },
    body: { email, role },
    headers: await as(by),
  });
}

async function accept(token: string, headers: Record<string, string>) {
  return call(acceptRoute, "/api/invitations/accept", {
    method: "POST",
    body: { token },
    headers,
  });
}

const mailsTo = (address: string) =>
  inbox.filter((m) => (m.to && "text" in m.to ? m.to.text : "").toLowerCase() === address);

/** The token in the link of the `nth` invitation mail to `address` (1: the first). */
async function tokenMailedTo(address: string, nth = 1): Promise<string> {
  await expect
    .poll(() => mailsTo(address.toLowerCase()).length, { timeout: 20_000 })
    .toBeGreaterThanOrEqual(nth);
  const text = mailsTo(address.toLowerCase())[nth - 1]!.text ?? "";
  const link = text.match(/http:\/\/app\.test\/invitations\/([A-Za-z0-9_-]+)/);
  expect(link).not.toBeNull();
  return link![1]!;
}

async function membersOf(org: string) {
  const res = await call(membersRoute, `/api/organizations/${org}/members`, {
    params: { id: org },
    headers: await as(OWNER),
  });
  return (res.json.members as Array<{ userId: string; role: string }>).map((m) => [
    m.userId,
    m.role,
  ]);
}

describe("invitations", () => {
  it("mails a single-use, expiring link that the invited person accepts when signed in", async () => {
    const org = await newOrganisation("Invite Co");
    const sent = await invite(org, emailOf(COLLEAGUE).toUpperCase(), "member");
    expect(sent.status).toBe(201);
    expect(sent.json.invitation).toMatchObject({ role: "member", invitedBy: OWNER });
    const pending = await call(invitationsRoute, `/api/organizations/${org}/invitations`, {
      params: { id: org },
      headers: await as(OWNER),
    });
    expect(pending.status).toBe(200);
    expect(pending.json.invitations).toEqual([
      expect.objectContaining({ id: sent.json.invitation.id, role: "member", expired: false }),
    ]);

    const token = await tokenMailedTo(emailOf(COLLEAGUE));
    const mail = mailsTo(emailOf(COLLEAGUE))[0]!;
    expect(mail.subject).toBe(`${OWNER} invited you to Invite Co on Agent Platform`);
    // Only the token's SHA-256 is kept, and the invitation expires in 7 days.
    const [row] =
      await db()`select * from organisation_invitations where id = ${sent.json.invitation.id}`;
    expect(Buffer.compare(row!.token_hash, sha256(token))).toBe(0);
    expect(JSON.stringify(row)).not.toContain(token);
    const days = ((row!.expires_at as Date).getTime() - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(6.99);
    expect(days).toBeLessThanOrEqual(7);
    expect(await invitationPreview(token)).toMatchObject({
      organisation: { id: org, name: "Invite Co" },
      role: "member",
      state: "pending",
    });

    // A forwarded link: someone else, signed in, is refused, and the invitation stays usable.
    const forwarded = await accept(token, await as(OTHER));
    expect(forwarded.status).toBe(403);
    expect(forwarded.json.error).toMatch(/sent to another email address/);
    // Accepting joins the person's account to an organisation: a session, not an API key.
    const key = (await createApiKey(COLLEAGUE, "invitations")).key;
    const byKey = await accept(token, { authorization: `Bearer ${key}` });
    expect(byKey.status).toBe(403);
    expect((await accept(token, {})).status).toBe(401);

    const accepted = await accept(token, await as(COLLEAGUE));
    expect(accepted.status).toBe(200);
    expect(accepted.json).toEqual({
      organisation: { id: org, name: "Invite Co", createdAt: expect.any(String) },
      role: "member",
    });
    expect(await membersOf(org)).toEqual([
      [OWNER, "owner"],
      [COLLEAGUE, "member"],
    ]);
    // Once only.
    const again = await accept(token, await as(COLLEAGUE));
    expect(again.status).toBe(410);
    expect(again.json.error).toBe("This invitation was already used");
    expect((await invitationPreview(token))?.state).toBe("accepted");
    const after = await call(invitationsRoute, `/api/organizations/${org}/invitations`, {
      params: { id: org },
      headers: await as(OWNER),
    });
    expect(after.json.invitations).toEqual([]);
    // The organisation's audit log names both steps.
    const audit = await db()<{ action: string; actor_id: string }[]>`
      select action, actor_id from audit_log where user_id = ${org} and action like 'invitation.%'
      order by id`;
    expect(audit).toEqual([
      { action: "invitation.sent", actor_id: OWNER },
      { action: "invitation.accepted", actor_id: COLLEAGUE },
    ]);
  }, 60_000);

  it("lets a new account join by registering with the link's token and the invited email", async () => {
    const org = await newOrganisation("Newcomers Ltd");
    const address = "Fresh.Person@Example.com";
    expect((await invite(org, address, "viewer")).status).toBe(201);
    const token = await tokenMailedTo(address);
    const register = (email: string, invitationToken: string) =>
      call(registerRoute, "/api/register", {
        method: "POST",
        body: { email, password: "correct horse battery", invitationToken },
        remoteAddress: "198.51.100.7",
      });
    // Another address with the link: no account is made.
    const wrong = await register("someone.else@example.com", token);
    expect(wrong.status).toBe(403);
    expect(wrong.json.error).toMatch(/sent to another email address: register with/);
    const [none] = await db()`select id from users where email = 'someone.else@example.com'`;
    expect(none).toBeUndefined();
    expect((await register("x@example.com", "not-a-token")).status).toBe(404);

    const made = await register("fresh.person@example.com", token);
    expect(made.status).toBe(201);
    expect(made.json).toEqual({
      id: expect.any(String),
      email: "fresh.person@example.com",
      name: "fresh.person@example.com",
    });
    expect(made.headers.getSetCookie().some((c) => c.startsWith("__session="))).toBe(true);
    expect(await membersOf(org)).toContainEqual([made.json.id, "viewer"]);
    // The link came through the mailbox: the address is proven.
    const [user] = await db()`select email_verified from users where id = ${made.json.id}`;
    expect(user?.email_verified).toBe(true);
    // The token is used up, for registering as for accepting.
    expect((await register("fresh.person2@example.com", token)).status).toBe(410);
    // Without a token, registering is as before.
    const plain = await call(registerRoute, "/api/register", {
      method: "POST",
      body: { email: "plain@example.com", password: "correct horse battery" },
      remoteAddress: "198.51.100.8",
    });
    expect(plain.status).toBe(201);
  }, 60_000);

  it("is revocable, replaced by a new one, expires, and follows the member rules", async () => {
    const org = await newOrganisation("Rules plc");
    expect((await invite(org, emailOf(ADMIN), "admin")).status).toBe(201);
    const adminToken = await tokenMailedTo(emailOf(ADMIN));
    expect((await accept(adminToken, await as(ADMIN))).status).toBe(200);

    // Only an owner invites an owner; a non-member does not see the organisation.
    const ownerByAdmin = await invite(org, emailOf(OTHER), "owner", ADMIN);
    expect(ownerByAdmin.status).toBe(403);
    expect(ownerByAdmin.json.error).toMatch(/Only an owner/);
    expect((await invite(org, emailOf(OTHER), "member", STRANGER)).status).toBe(404);
    // An existing member's address is not invited again.
    const member = await invite(org, emailOf(ADMIN), "member");
    expect(member.status).toBe(409);

    // Revoked: the link answers 410.
    const first = await invite(org, emailOf(OTHER), "member", ADMIN);
    expect(first.status).toBe(201);
    const revokedToken = await tokenMailedTo(emailOf(OTHER));
    const revoke = (id: string, by = ADMIN) =>
      as(by).then((headers) =>
        call(invitationRoute, `/api/organizations/${org}/invitations/${id}`, {
          method: "DELETE",
          params: { id: org, invitationId: id },
          headers,
        }),
      );
    expect((await revoke(first.json.invitation.id, STRANGER)).status).toBe(404);
    expect((await revoke(first.json.invitation.id)).status).toBe(200);
    expect((await revoke(first.json.invitation.id)).status).toBe(409);
    const revoked = await accept(revokedToken, await as(OTHER));
    expect(revoked.status).toBe(410);
    expect(revoked.json.error).toBe("This invitation was revoked");

    // Inviting again replaces the open invitation: the earlier link stops working.
    await invite(org, emailOf(OTHER), "viewer");
    const replacedToken = await tokenMailedTo(emailOf(OTHER), 2);
    await invite(org, emailOf(OTHER), "member");
    const currentToken = await tokenMailedTo(emailOf(OTHER), 3);
    expect((await accept(replacedToken, await as(OTHER))).status).toBe(410);

    // Expired: 410, and it stays out of the members.
    await db()`update organisation_invitations set expires_at = now() - interval '1 second'
      where token_hash = ${sha256(currentToken)}`;
    const expired = await accept(currentToken, await as(OTHER));
    expect(expired.status).toBe(410);
    expect(expired.json.error).toMatch(/expired/);
    expect(await membersOf(org)).toEqual([
      [OWNER, "owner"],
      [ADMIN, "admin"],
    ]);
  }, 60_000);

  it("settles an open invitation when the address is added directly", async () => {
    const org = await newOrganisation("Direct Co");
    await invite(org, emailOf(STRANGER), "member");
    const token = await tokenMailedTo(emailOf(STRANGER));
    const added = await call(membersRoute, `/api/organizations/${org}/members`, {
      method: "POST",
      params: { id: org },
      body: { email: emailOf(STRANGER), role: "viewer" },
      headers: await as(OWNER),
    });
    expect(added.status).toBe(201);
    expect((await accept(token, await as(STRANGER))).status).toBe(410);
    expect(await membersOf(org)).toContainEqual([STRANGER, "viewer"]);
  }, 60_000);
});
