import { describe, expect, it } from "vitest";
import * as register from "../../app/routes/api.register.ts";
import * as user from "../../app/routes/api.user.ts";
import * as signupPage from "../../app/routes/signup.tsx";
import { creditBalance, REFERRAL_CREDITS } from "../../app/server/accounts/credits.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { rateLimitScopes } from "../../app/server/platform/rate-limit.server.ts";
import { call } from "../helpers/api.ts";
import { cookieOf, registerUser, uniqueEmail } from "./helpers.ts";

describe("POST /api/register", () => {
  it("creates the user: 201 {id, email, name}, name defaulting to the email, argon2id hash", async () => {
    const email = uniqueEmail("Ada");
    const res = await registerUser({ email, password: "longenough" });
    expect(res.status).toBe(201);
    expect(res.json).toEqual({
      id: expect.stringMatching(/^usr_[0-9a-z]{20}$/),
      email,
      name: email,
    });
    const [row] = await db()`select password_hash, plan from users where id = ${res.json.id}`;
    expect(row?.password_hash).toMatch(/^\$argon2id\$/);
    expect(row?.password_hash).not.toContain("longenough");
    expect(row?.plan).toBe("free");
  });

  it("keeps a given name and emits user.created", async () => {
    const res = await registerUser({ name: "Grace Hopper" });
    expect(res.json.name).toBe("Grace Hopper");
    const events = await db()`select type, data from events where data->>'id' = ${res.json.id}`;
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      type: "user.created",
      data: { id: res.json.id, name: "Grace Hopper", plan: "free" },
    });
  });

  it.each([
    [{ password: "longenough" }, /^email: is required/],
    [{ email: "not-an-email", password: "longenough" }, /^email: must be a valid email address/],
    [{ email: "a@example.com" }, /^password: is required/],
    [{ email: "a@example.com", password: "short" }, /^password: must be at least 8 characters/],
    [
      { email: "a@example.com", password: "longenough", referralCode: "not-alnum!" },
      /^referralCode: /,
    ],
    [
      { email: "a@example.com", password: "longenough", referralCode: "A".repeat(21) },
      /^referralCode: /,
    ],
    [{ email: "0xabc@Wallet.Invalid", password: "longenough" }, /^email: uses a reserved domain/],
  ])("answers 400 naming the invalid field (%j)", async (body, message) => {
    const res = await call(register, "/api/register", { method: "POST", body });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(message);
  });

  it("answers 400 for a missing body", async () => {
    const res = await call(register, "/api/register", { method: "POST" });
    expect(res.status).toBe(400);
  });

  it("answers 409 when the email exists, compared case-insensitively", async () => {
    const email = uniqueEmail("case");
    expect((await registerUser({ email })).status).toBe(201);
    const again = await registerUser({ email: email.toUpperCase() });
    expect(again.status).toBe(409);
    expect(again.json).toEqual({ error: "A user with this email already exists" });
  });

  it("answers 403 to a known bot User-Agent and to a filled honeypot", async () => {
    const bot = await registerUser(
      {},
      { headers: { "user-agent": "Mozilla/5.0 (compatible; Googlebot/2.1)" } },
    );
    expect(bot.status).toBe(403);
    expect(bot.json.error).toMatch(/bot/);
    const curl = await registerUser({}, { headers: { "user-agent": "curl/8.5.0" } });
    expect(curl.status).toBe(403);
    const honeypot = await call(register, "/api/register", {
      method: "POST",
      body: { email: uniqueEmail(), password: "longenough", website: "http://spam.example" },
    });
    expect(honeypot.status).toBe(403);
    const browser = await registerUser(
      {},
      { headers: { "user-agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/140.0 Safari/537.36" } },
    );
    expect(browser.status).toBe(201);
  });

  it("answers 429 once the per-IP budget is spent, other IPs unaffected", async () => {
    const { points } = rateLimitScopes.register;
    for (let i = 0; i < points; i++) {
      const ok = await registerUser({}, { remoteAddress: "203.0.113.50" });
      expect(ok.status).toBe(201);
    }
    const limited = await registerUser({}, { remoteAddress: "203.0.113.50" });
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBeTruthy();
    expect((await registerUser({}, { remoteAddress: "203.0.113.51" })).status).toBe(201);
  });

  it("credits both users once for a referral code naming an existing user", async () => {
    const referrer = await registerUser();
    const [{ referral_code: code }] = (await db()`
      select referral_code from users where id = ${referrer.json.id}`) as unknown as [
      { referral_code: string },
    ];
    const referred = await registerUser({ referralCode: code.toLowerCase() });
    expect(referred.status).toBe(201);
    expect(await creditBalance(referred.json.id)).toBe(REFERRAL_CREDITS);
    expect(await creditBalance(referrer.json.id)).toBe(REFERRAL_CREDITS);
    // A second referral pays the referrer again (another new user), never twice for one pair.
    const second = await registerUser({ referralCode: code });
    expect(await creditBalance(referrer.json.id)).toBe(2 * REFERRAL_CREDITS);
    expect(await creditBalance(second.json.id)).toBe(REFERRAL_CREDITS);
    const { grantReferralCredits } = await import("../../app/server/accounts/credits.server.ts");
    await db().begin((t) => grantReferralCredits(t, second.json.id, referrer.json.id));
    expect(await creditBalance(referrer.json.id)).toBe(2 * REFERRAL_CREDITS);
  });

  it("ignores a well-formed referral code that names nobody", async () => {
    const res = await registerUser({ referralCode: "NOBODY42" });
    expect(res.status).toBe(201);
    expect(await creditBalance(res.json.id)).toBe(0);
  });
});

describe("sign-up signs in at once (decision 0010, amended)", () => {
  it("POST /api/register keeps its body and sets a session cookie that works", async () => {
    const email = uniqueEmail("instant");
    const res = await registerUser({ email });
    expect(res.status).toBe(201);
    expect(Object.keys(res.json).sort()).toEqual(["email", "id", "name"]);
    const me = await call(user, "/api/user", { headers: { cookie: cookieOf(res) } });
    expect(me.status).toBe(200);
    expect(me.json.user).toMatchObject({ id: res.json.id, email });
    const [row] = await db()`select email_verified from users where id = ${res.json.id}`;
    expect(row?.email_verified).toBe(false); // signed in, but the mailbox is still unproven
  });

  it("a request a browser marks as cross-site creates the account but signs nobody in", async () => {
    const res = await registerUser({}, { headers: { origin: "https://evil.example" } });
    expect(res.status).toBe(201);
    expect(res.headers.getSetCookie().some((c) => c.startsWith("__session="))).toBe(false);
  });

  it("the sign-up page lands on /welcome (the guided first agent) signed in", async () => {
    const email = uniqueEmail("page");
    const request = new Request("http://localhost/signup", {
      method: "POST",
      headers: {
        origin: "http://localhost",
        "content-type": "application/x-www-form-urlencoded",
        "user-agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/140.0.0.0 Safari/537.36",
      },
      body: new URLSearchParams({ email, password: "a good long password" }),
    });
    // The page-action helper hands a redirect to Remix by throwing it.
    const res = (await signupPage
      .action({ request, params: {}, context: { remoteAddress: "198.51.100.7" } })
      .catch((thrown: unknown) => thrown)) as Response;
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/welcome");
    const me = await call(user, "/api/user", { headers: { cookie: cookieOf(res) } });
    expect(me.status).toBe(200);
    expect(me.json.user.email).toBe(email);
  });
});
