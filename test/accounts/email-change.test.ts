import type { ParsedMail } from "mailparser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as confirmEmail from "../../app/routes/api.settings.email.confirm.ts";
import * as changeEmail from "../../app/routes/api.settings.email.ts";
import * as userRoute from "../../app/routes/api.user.ts";
import * as confirmPage from "../../app/routes/settings.email.confirm.tsx";
import * as settingsPage from "../../app/routes/settings.tsx";
import { createApiKey } from "../../app/server/accounts/api-keys.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { call } from "../helpers/api.ts";
import { page } from "../helpers/pages.ts";
import { startSmtpInbox } from "../helpers/smtp-inbox.ts";
import { as, newUser, signInUser, uniqueEmail } from "./helpers.ts";

// Changing the sign-in email (decision 0156): web → pg-boss → worker → nodemailer → a real SMTP
// server here. The link goes to the new address, the old one is told once it is done.
let smtp: Awaited<ReturnType<typeof startSmtpInbox>>;
let inbox: ParsedMail[];

beforeAll(async () => {
  smtp = await startSmtpInbox();
  inbox = smtp.inbox;
  process.env.SMTP_URL = smtp.url;
  process.env.APP_URL = "http://app.test";
  resetEnvCache();
  await startWorker();
});

afterAll(async () => {
  await stopWorker(5_000);
  await smtp.close();
  delete process.env.SMTP_URL;
  delete process.env.APP_URL;
  resetEnvCache();
});

const mailsTo = (address: string) =>
  inbox.filter((m) => (m.to && "text" in m.to ? m.to.text : "") === address);

/** The token of the `nth` confirmation mail to `email` (1: the first). */
async function confirmToken(email: string, nth = 1): Promise<string> {
  await expect.poll(() => mailsTo(email).length, { timeout: 20_000 }).toBeGreaterThanOrEqual(nth);
  const text = mailsTo(email)[nth - 1]?.text ?? "";
  const token = text.match(
    /http:\/\/app\.test\/settings\/email\/confirm\?token=([A-Za-z0-9_-]+)/,
  )?.[1];
  expect(token).toBeDefined();
  return token as string;
}

// Each call from its own address: the per-IP limit is not what these tests are about.
let ipCounter = 0;
const freshIp = () => `192.0.2.${++ipCounter}`;
const request = (who: { cookie?: string; key?: string }, body: unknown) =>
  as(who, changeEmail, "/api/settings/email", {
    method: "POST",
    body,
    remoteAddress: freshIp(),
  });
const confirm = (token: string) =>
  call(confirmEmail, "/api/settings/email/confirm", {
    method: "POST",
    body: { token },
    remoteAddress: freshIp(),
  });

describe("email change", () => {
  it("confirms by the link sent to the new address, tells the old one, and audits it", async () => {
    const user = await newUser();
    const next = uniqueEmail("moved");

    const wrong = await request(user, { newEmail: next, currentPassword: "not it" });
    expect(wrong).toMatchObject({ status: 400, json: { error: "currentPassword: is incorrect" } });
    const missing = await request(user, { newEmail: next });
    expect(missing).toMatchObject({ status: 400, json: { error: "currentPassword: is required" } });

    const asked = await request(user, { newEmail: next, currentPassword: user.password });
    expect(asked.status).toBe(202);
    expect(asked.json).toEqual({
      success: true,
      pendingEmail: next,
      message: `A confirmation link has been sent to ${next}`,
    });
    const token = await confirmToken(next);
    // Nothing changes before the link is opened.
    expect((await as(user, userRoute, "/api/user")).json.user.email).toBe(user.email);

    // The link's page shows what it would do without doing it (a scanner's GET changes nothing).
    const shown = await page(confirmPage, `/settings/email/confirm?token=${token}`, undefined);
    expect(shown.body).toEqual({ token, newEmail: next });
    const done = await confirm(token);
    expect(done).toMatchObject({ status: 200, json: { success: true, email: next } });
    expect((await as(user, userRoute, "/api/user")).json.user.email).toBe(next);
    const [row] = await db()`select email_verified from users where id = ${user.id}`;
    expect(row?.email_verified).toBe(true);

    // Signing in: the new address works, the old one no longer does.
    expect((await signInUser(next, user.password)).status).toBe(200);
    expect((await signInUser(user.email, user.password)).status).toBe(401);

    // The old address is told, without a link to follow.
    await expect.poll(() => mailsTo(user.email).length, { timeout: 20_000 }).toBe(1);
    const notice = mailsTo(user.email)[0]?.text ?? "";
    expect(notice).toContain(`changed from this address to ${next}`);
    expect(notice).not.toMatch(/token=/);

    // Once only.
    expect(await confirm(token)).toMatchObject({
      status: 400,
      json: { error: "token: invalid or already used" },
    });

    const audit = await db()<{ outcome: string; details: Record<string, unknown> }[]>`
      select outcome, details from audit_log
      where user_id = ${user.id} and action = 'email.changed' order by id`;
    expect(audit).toEqual([
      { outcome: "failure", details: {} },
      { outcome: "success", details: { from: user.email, to: next } },
    ]);
    const everything = JSON.stringify(
      await db()`select * from audit_log where user_id = ${user.id}`,
    );
    expect(everything).not.toContain(token);
    expect(everything).not.toContain(user.password);
  });

  it("refuses a taken, the same or an invalid address, API keys, and a superseded link", async () => {
    const user = await newUser();
    const other = await newUser();
    const ask = (newEmail: string) => request(user, { newEmail, currentPassword: user.password });
    expect((await ask(other.email.toUpperCase())).status).toBe(409);
    expect(await ask(user.email)).toMatchObject({
      status: 400,
      json: { error: "newEmail: is already this account's email" },
    });
    expect((await ask("not-an-email")).status).toBe(400);
    expect((await ask("0xabc@wallet.invalid")).status).toBe(400);
    const { key } = await createApiKey(user.id, "script");
    const byKey = await request(
      { key },
      { newEmail: uniqueEmail(), currentPassword: user.password },
    );
    expect(byKey.status).toBeGreaterThanOrEqual(401);
    expect(byKey.status).toBeLessThanOrEqual(403);
    expect((await request({}, { newEmail: uniqueEmail() })).status).toBe(401);

    // A second request supersedes the first: only the newest link works.
    const first = uniqueEmail("first");
    const second = uniqueEmail("second");
    expect((await ask(first)).status).toBe(202);
    const firstToken = await confirmToken(first);
    expect((await ask(second)).status).toBe(202);
    const secondToken = await confirmToken(second);
    expect((await confirm(firstToken)).status).toBe(400);

    // Taken meanwhile by someone else: 409, the account keeps its email.
    await newUser({ email: second });
    expect((await confirm(secondToken)).status).toBe(409);
    expect((await as(user, userRoute, "/api/user")).json.user.email).toBe(user.email);
    expect((await confirm("nonsense")).status).toBe(400);
  });

  it("works from the settings page and the link's page without JavaScript", async () => {
    const user = await newUser();
    const next = uniqueEmail("page");
    const refused = await page(settingsPage, "/settings", user, {
      intent: "email",
      newEmail: next,
      currentPassword: "wrong",
    });
    expect(refused.status).toBe(400);
    const posted = await page(settingsPage, "/settings", user, {
      intent: "email",
      newEmail: next,
      currentPassword: user.password,
    });
    expect(posted.body).toMatchObject({ intent: "email", value: { pendingEmail: next } });
    const token = await confirmToken(next);

    const bad = await page(confirmPage, "/settings/email/confirm", undefined, { token: "nope" });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: "token: invalid or already used" });
    const used = await page(confirmPage, "/settings/email/confirm", undefined, { token });
    expect(used).toMatchObject({ status: 302, location: "/settings?email=changed" });
    const settings = await page(settingsPage, "/settings?email=changed", user);
    expect(settings.body).toMatchObject({ user: { email: next }, emailChanged: true });
    const gone = await page(confirmPage, `/settings/email/confirm?token=${token}`, undefined);
    expect(gone.body).toEqual({ token, newEmail: null });
  });
});
