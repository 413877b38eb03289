import type { ParsedMail } from "mailparser";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as brandingRoute from "../../app/routes/api.organizations.$id.branding.ts";
import * as invitationsRoute from "../../app/routes/api.organizations.$id.invitations.ts";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import {
  addMember,
  createOrganisation,
} from "../../app/server/organisations/organisations.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { call } from "../helpers/api.ts";
import { startSmtpInbox } from "../helpers/smtp-inbox.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// White-label branding (issue 48, decision 0207): set through the API on a label or network
// plan (402 on others), and carried by the invitation mail through a real SMTP server: the From
// name is the sender name (the address stays MAIL_FROM's), the text and HTML show the display
// name and the logo.

let inbox: ParsedMail[] = [];
let smtp: Awaited<ReturnType<typeof startSmtpInbox>>;

const OWNER = "usr_brand_owner";
const MEMBER = "usr_brand_member";
const STRANGER = "usr_brand_stranger";

beforeAll(async () => {
  smtp = await startSmtpInbox();
  inbox = smtp.inbox;
  process.env.SMTP_URL = smtp.url;
  process.env.APP_URL = "http://app.test";
  process.env.MAIL_FROM = "Agent Platform <no-reply@platform.test>";
  resetEnvCache();
  for (const id of [OWNER, MEMBER, STRANGER]) await ensureUser(id);
  await startWorker();
});
beforeEach(() => resetRateLimiters());
afterAll(async () => {
  await stopWorker(5_000);
  await smtp.close();
  delete process.env.SMTP_URL;
  delete process.env.APP_URL;
  delete process.env.MAIL_FROM;
  resetEnvCache();
});

const as = async (userId: string) => ({ cookie: await sessionCookieFor(userId) });

async function organisation(name: string, plan: "label" | "network" | "collective" | null) {
  const { organisation: org } = await createOrganisation(OWNER, name);
  if (plan) await assignPlan(org.id, plan, "usr_brand_operator");
  // Without a plan the owner takes the one seat: the member is a viewer there.
  const role = plan ? "member" : "viewer";
  await addMember(org.id, OWNER, { email: `${MEMBER}@example.com`, role });
  return org.id;
}

const patch = async (org: string, body: unknown, by = OWNER) =>
  call(brandingRoute, `/api/organizations/${org}/branding`, {
    method: "PATCH",
    params: { id: org },
    body,
    headers: await as(by),
  });

const invite = async (org: string, email: string) =>
  call(invitationsRoute, `/api/organizations/${org}/invitations`, {
    method: "POST",
    params: { id: org },
    body: { email, role: "viewer" },
    headers: await as(OWNER),
  });

async function mailTo(address: string): Promise<ParsedMail> {
  await expect
    .poll(() => inbox.filter((m) => m.to && "text" in m.to && m.to.text === address).length, {
      timeout: 20_000,
    })
    .toBe(1);
  return inbox.find((m) => m.to && "text" in m.to && m.to.text === address) as ParsedMail;
}

const LOGO = "https://cdn.acme.example.com/logo.png";

describe("white-label branding", () => {
  it("is set by members.manage on label, carried by the invitation mail", async () => {
    const org = await organisation("acme internal name", "label");
    const set = await patch(org, {
      displayName: "Acme Robotics",
      logoUrl: LOGO,
      senderName: "Acme Support",
    });
    expect(set.status).toBe(200);
    expect(set.json.branding).toMatchObject({
      displayName: "Acme Robotics",
      logoUrl: LOGO,
      senderName: "Acme Support",
      available: true,
    });
    // Only the given fields change; null clears one.
    const partial = await patch(org, { senderName: "Acme Team" });
    expect(partial.json.branding).toMatchObject({
      displayName: "Acme Robotics",
      senderName: "Acme Team",
    });
    const read = await call(brandingRoute, `/api/organizations/${org}/branding`, {
      params: { id: org },
      headers: await as(MEMBER),
    });
    expect(read.status).toBe(200);
    expect(read.json.branding.senderName).toBe("Acme Team");
    const [audit] = await db()<{ details: { fields: string } }[]>`
      select details from audit_log where user_id = ${org} and action = 'branding.changed'
      order by id desc limit 1`;
    expect(audit?.details.fields).toBe("senderName");

    const to = "brand-invitee@example.com";
    expect((await invite(org, to)).status).toBe(201);
    const mail = await mailTo(to);
    expect(mail.from?.value).toEqual([{ name: "Acme Team", address: "no-reply@platform.test" }]);
    expect(mail.subject).toBe(`${OWNER} invited you to Acme Robotics`);
    expect(mail.text).toContain('join the organisation "Acme Robotics" as a viewer');
    expect(mail.text).not.toContain("acme internal name");
    expect(mail.text).not.toContain("Agent Platform");
    expect(mail.text).toContain(LOGO);
    expect(mail.html).toContain(`<img src="${LOGO}" alt="Acme Robotics"`);
    expect(mail.html).toMatch(/<a href="http:\/\/app\.test\/invitations\/[\w-]+">/);
  });

  it("leaves an organisation without branding, or whose plan dropped it, on the platform's sender", async () => {
    const org = await organisation("Plain Co", "network");
    expect((await invite(org, "plain-invitee@example.com")).status).toBe(201);
    const plain = await mailTo("plain-invitee@example.com");
    expect(plain.from?.value).toEqual([
      { name: "Agent Platform", address: "no-reply@platform.test" },
    ]);
    expect(plain.subject).toBe(`${OWNER} invited you to Plain Co on Agent Platform`);
    expect(plain.html).toBeFalsy();

    expect((await patch(org, { displayName: "Plain Brand", senderName: "Plain" })).status).toBe(
      200,
    );
    await assignPlan(org, "collective", "usr_brand_operator");
    expect((await invite(org, "dropped-invitee@example.com")).status).toBe(201);
    const dropped = await mailTo("dropped-invitee@example.com");
    expect(dropped.from?.value[0]?.name).toBe("Agent Platform");
    expect(dropped.subject).toContain("Plain Co on Agent Platform");
  });

  it("answers 402 naming the plans on other plans, 403 to a member, 404 to a stranger", async () => {
    for (const plan of ["collective", null] as const) {
      const org = await organisation(`No brand ${plan}`, plan);
      const refused = await patch(org, { displayName: "Nope" });
      expect(refused.status).toBe(402);
      expect(refused.json.error).toMatch(/needs the label or network plan/);
      expect(refused.json.error).toContain(plan ? "its plan is collective" : "it has no plan");
    }
    const org = await organisation("Guarded", "label");
    const member = await patch(org, { displayName: "Mine" }, MEMBER);
    expect(member.status).toBe(403);
    expect(member.json.error).toMatch(/\(member\) does not allow this/);
    const stranger = await patch(org, { displayName: "Mine" }, STRANGER);
    expect(stranger.status).toBe(404);
    expect(stranger.json).toEqual({ error: "Organisation not found" });
  });

  it("validates every field: https logo only, one-line names, something to change", async () => {
    const org = await organisation("Strict", "label");
    for (const body of [
      { logoUrl: "http://cdn.example.com/logo.png" },
      { logoUrl: "javascript:alert(1)" },
      { logoUrl: `https://cdn.example.com/${"a".repeat(500)}.png` },
      { senderName: "Evil\r\nBcc: victim@example.com" },
      { displayName: "" },
      { senderName: "x".repeat(61) },
      {},
      { colour: "red" },
    ]) {
      const res = await patch(org, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(typeof res.json.error).toBe("string");
    }
    const cleared = await patch(org, { logoUrl: null, displayName: "Strict Ltd" });
    expect(cleared.status).toBe(200);
    expect(cleared.json.branding).toMatchObject({ logoUrl: null, displayName: "Strict Ltd" });
  });
});
