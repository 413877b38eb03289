import type { ParsedMail } from "mailparser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as forgot from "../../app/routes/api.auth.forgot-password.ts";
import * as reset from "../../app/routes/api.auth.reset-password.ts";
import * as keys from "../../app/routes/api.keys.ts";
import * as user from "../../app/routes/api.user.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { sha256 } from "../../app/server/platform/ids.server.ts";
import { rateLimitScopes } from "../../app/server/platform/rate-limit.server.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { call } from "../helpers/api.ts";
import { startSmtpInbox } from "../helpers/smtp-inbox.ts";
import { as, cookieOf, newUser, signInUser, uniqueEmail } from "./helpers.ts";

// The reset email travels web → pg-boss → worker → nodemailer → a real SMTP server here.
let smtp: Awaited<ReturnType<typeof startSmtpInbox>>;
let inbox: ParsedMail[];
let ipCounter = 0;
const freshIp = () => `192.0.2.${++ipCounter}`;

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
/** The latest mail to `address`. */
const mailTo = (address: string) => mailsTo(address).at(-1);

const requestReset = (
  email: string,
  opts: { ip?: string; headers?: Record<string, string> } = {},
) =>
  call(forgot, "/api/auth/forgot-password", {
    method: "POST",
    body: { email },
    remoteAddress: opts.ip ?? freshIp(),
    ...(opts.headers ? { headers: opts.headers } : {}),
  });

const doReset = (body: unknown) =>
  call(reset, "/api/auth/reset-password", { method: "POST", body, remoteAddress: freshIp() });

/** The link of the `nth` reset mail to `email` (1: the first). */
async function resetLink(email: string, nth = 1): Promise<URL> {
  await expect.poll(() => mailsTo(email).length, { timeout: 20_000 }).toBeGreaterThanOrEqual(nth);
  const text = mailTo(email)!.text ?? "";
  const link = text.match(/http:\/\/app\.test\/reset-password\?token=[A-Za-z0-9_-]+/)?.[0];
  expect(link).toBeDefined();
  return new URL(link!);
}

describe("password reset", () => {
  it("emails a link whose token resets the password once and revokes every session", async () => {
    const u = await newUser();
    const res = await requestReset(u.email.toUpperCase());
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ message: "If an account exists, a reset link has been sent" });
    const link = await resetLink(u.email);
    expect(mailTo(u.email)!.subject).toMatch(/Reset your/);
    const token = link.searchParams.get("token")!;
    // Stored hashed only.
    const [row] = await db()`select token_hash, expires_at from password_reset_tokens
      where user_id = ${u.id}`;
    expect(Buffer.compare(row!.token_hash, sha256(token))).toBe(0);
    const minutes = ((row!.expires_at as Date).getTime() - Date.now()) / 60_000;
    expect(minutes).toBeGreaterThan(58);
    expect(minutes).toBeLessThanOrEqual(60);

    const done = await doReset({ token, password: "sixsix" });
    expect(done.status).toBe(200);
    expect(done.json).toEqual({ message: "Password reset successfully" });
    expect((await as(u, user, "/api/user")).status).toBe(401); // sessions revoked
    expect((await signInUser(u.email, u.password)).status).toBe(401);
    expect((await signInUser(u.email, "sixsix")).status).toBe(200);
    // Works once.
    const again = await doReset({ token, password: "another1" });
    expect(again.status).toBe(400);
  });

  it("proves the email: on an unproven one, access set up before (API keys, security keys) goes", async () => {
    // Someone registered this address and made an API key; the mailbox's owner resets.
    const u = await newUser();
    const key = await as(u, keys, "/api/keys", { method: "POST", body: { name: "squatter" } });
    expect(key.status).toBe(201);
    const apiKey = { key: key.json.key as string };
    expect((await as(apiKey, user, "/api/user")).status).toBe(200);
    await requestReset(u.email);
    const token = (await resetLink(u.email)).searchParams.get("token")!;
    expect((await doReset({ token, password: "sixsix" })).status).toBe(200);
    expect((await as(apiKey, user, "/api/user")).status).toBe(401);
    const [row] = await db()`select email_verified from users where id = ${u.id}`;
    expect(row?.email_verified).toBe(true);

    // Once proven, a later reset keeps the owner's own keys.
    const signedIn = { cookie: cookieOf(await signInUser(u.email, "sixsix")) };
    const own = await as(signedIn, keys, "/api/keys", { method: "POST", body: { name: "mine" } });
    await requestReset(u.email);
    const second = (await resetLink(u.email, 2)).searchParams.get("token")!;
    expect((await doReset({ token: second, password: "sevenseven" })).status).toBe(200);
    expect((await as({ key: own.json.key as string }, user, "/api/user")).status).toBe(200);
  });

  it("answers the same message for an unknown email, and sends nothing", async () => {
    const email = uniqueEmail("ghost");
    const res = await requestReset(email);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ message: "If an account exists, a reset link has been sent" });
    expect(await db()`select 1 from password_reset_tokens where user_id is null`).toHaveLength(0);
  });

  it("answers 400 for a missing or invalid email, 403 for bots, 429 over the per-IP limit", async () => {
    const missing = await call(forgot, "/api/auth/forgot-password", {
      method: "POST",
      body: {},
      remoteAddress: freshIp(),
    });
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatch(/^email: /);
    expect((await requestReset("nope")).status).toBe(400);
    expect(
      (await requestReset(uniqueEmail(), { headers: { "user-agent": "python-requests/2.32" } }))
        .status,
    ).toBe(403);
    const honeypot = await call(forgot, "/api/auth/forgot-password", {
      method: "POST",
      body: { email: uniqueEmail(), website: "x" },
      remoteAddress: freshIp(),
    });
    expect(honeypot.status).toBe(403);
    const ip = freshIp();
    for (let i = 0; i < rateLimitScopes["forgot-password"].points; i++) {
      expect((await requestReset(uniqueEmail(), { ip })).status).toBe(200);
    }
    expect((await requestReset(uniqueEmail(), { ip })).status).toBe(429);
  });

  it("answers 400 for a missing token or password, a short password, an unknown or expired token", async () => {
    const u = await newUser();
    await requestReset(u.email);
    const token = (await resetLink(u.email)).searchParams.get("token")!;
    for (const [body, message] of [
      [{ password: "sixsix" }, /^token: /],
      [{ token }, /^password: /],
      [{ token, password: "five5" }, /^password: must be at least 6/],
      [{ token: "made-up", password: "sixsix" }, /^token: invalid/],
    ] as const) {
      const res = await doReset(body);
      expect(res.status).toBe(400);
      expect(res.json.error).toMatch(message);
    }
    await db()`update password_reset_tokens set expires_at = now() - interval '1 second'
      where token_hash = ${sha256(token)}`;
    const expired = await doReset({ token, password: "sixsix" });
    expect(expired.status).toBe(400);
    expect(expired.json.error).toBe("token: expired");
  });

  it("answers 404 when the token's user is gone", async () => {
    const u = await newUser();
    await requestReset(u.email);
    const token = (await resetLink(u.email)).searchParams.get("token")!;
    await as(u, user, "/api/user", { method: "DELETE" });
    const res = await doReset({ token, password: "sixsix" });
    expect(res.status).toBe(404);
    expect(res.json).toEqual({ error: "User not found" });
  });

  it("answers 429 over the per-IP limit of reset attempts", async () => {
    const ip = freshIp();
    for (let i = 0; i < rateLimitScopes["reset-password"].points; i++) {
      await call(reset, "/api/auth/reset-password", {
        method: "POST",
        body: { token: "x", password: "sixsix" },
        remoteAddress: ip,
      });
    }
    const res = await call(reset, "/api/auth/reset-password", {
      method: "POST",
      body: { token: "x", password: "sixsix" },
      remoteAddress: ip,
    });
    expect(res.status).toBe(429);
  });
});
