import { describe, expect, it } from "vitest";
import * as register from "../../app/routes/api.register.ts";
import * as user from "../../app/routes/api.user.ts";
import * as signupPage from "../../app/routes/signup.tsx";
import {
  creditBalance,
  MICRO_USD_PER_CREDIT,
  payReferral,
  REFERRAL_CREDITS,
  REFERRALS_PAID_PER_REFERRER,
} from "../../app/server/accounts/credits.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { rateLimitScopes } from "../../app/server/platform/rate-limit.server.ts";
import { call } from "../helpers/api.ts";
import { cookieOf, registerUser, uniqueEmail } from "./helpers.ts";
import { verifyEmailByResetLink } from "./verify-email.ts";

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

  it("counts an IPv6 client by its /64: rotating its addresses does not renew the budget", async () => {
    const { points } = rateLimitScopes.register;
    for (let i = 0; i < points; i++) {
      const ok = await registerUser(
        {},
        { remoteAddress: `2001:db8:f00:1::${(i + 1).toString(16)}` },
      );
      expect(ok.status).toBe(201);
    }
    const rotated = await registerUser({}, { remoteAddress: "2001:db8:f00:1:dead:beef::1" });
    expect(rotated.status).toBe(429);
    expect((await registerUser({}, { remoteAddress: "2001:db8:f00:2::1" })).status).toBe(201);
  });

  const codeOf = async (userId: string) => {
    const [row] = await db()<{ code: string }[]>`
      select referral_code as code from users where id = ${userId}`;
    return row!.code;
  };

  it("credits both users once the referred account's email is verified, exactly once", async () => {
    const referrer = await registerUser();
    const code = await codeOf(referrer.json.id);
    const email = uniqueEmail("referred");
    const referred = await registerUser({ email, referralCode: code.toLowerCase() });
    expect(referred.status).toBe(201);
    // Registering proves no mailbox: nothing is paid yet.
    expect(await creditBalance(referred.json.id)).toBe(0);
    expect(await creditBalance(referrer.json.id)).toBe(0);

    await verifyEmailByResetLink(email);
    expect(await creditBalance(referred.json.id)).toBe(REFERRAL_CREDITS);
    expect(await creditBalance(referrer.json.id)).toBe(REFERRAL_CREDITS);

    // A second verification, and a retried payment, pay nothing more.
    await verifyEmailByResetLink(email);
    await db().begin((t) => payReferral(t, referred.json.id));
    expect(await creditBalance(referred.json.id)).toBe(REFERRAL_CREDITS);
    expect(await creditBalance(referrer.json.id)).toBe(REFERRAL_CREDITS);

    // Another referred account pays the referrer again once it is verified.
    const secondEmail = uniqueEmail("referred-2");
    const second = await registerUser({ email: secondEmail, referralCode: code });
    expect(await creditBalance(referrer.json.id)).toBe(REFERRAL_CREDITS);
    await verifyEmailByResetLink(secondEmail);
    expect(await creditBalance(referrer.json.id)).toBe(2 * REFERRAL_CREDITS);
    expect(await creditBalance(second.json.id)).toBe(REFERRAL_CREDITS);
  });

  it("pays a referrer for at most REFERRALS_PAID_PER_REFERRER referrals, even when two are verified at once", async () => {
    const referrer = await registerUser();
    const code = await codeOf(referrer.json.id);
    // The referrer has already been paid for all but one of the cap.
    const paid = REFERRALS_PAID_PER_REFERRER - 1;
    for (let i = 0; i < paid; i++) {
      await db()`
        insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference)
        values (${`led_cap_${i}`}, ${referrer.json.id}, ${REFERRAL_CREDITS * MICRO_USD_PER_CREDIT},
                'referral', ${`referred:usr_earlier_${i}`})`;
    }
    const a = await registerUser({ referralCode: code });
    const b = await registerUser({ referralCode: code });
    await db()`update users set email_verified = true where id in ${db()([a.json.id, b.json.id])}`;
    // A pays and holds its transaction open; B verifies meanwhile and waits on a lock (which one
    // depends on the code under test). B must then find the cap reached, not count the places
    // A had not committed yet.
    let commitA = () => {};
    let aPaid = false;
    const first = db().begin(async (t) => {
      await payReferral(t, a.json.id);
      aPaid = true;
      await new Promise<void>((resolve) => {
        commitA = resolve;
      });
    });
    await expect.poll(() => aPaid).toBe(true);
    let bDone = false;
    const secondPaid = db()
      .begin((t) => payReferral(t, b.json.id))
      .finally(() => {
        bDone = true;
      });
    await expect
      .poll(
        async () =>
          bDone ||
          (
            await db()`select 1 from pg_stat_activity
                        where datname = current_database() and wait_event_type = 'Lock'`
          ).length > 0,
      )
      .toBe(true);
    commitA();
    await Promise.all([first, secondPaid]);
    expect(await creditBalance(referrer.json.id)).toBe(
      REFERRALS_PAID_PER_REFERRER * REFERRAL_CREDITS,
    );
    // A took the last place; B stays unpaid (neither side).
    expect(await creditBalance(a.json.id)).toBe(REFERRAL_CREDITS);
    expect(await creditBalance(b.json.id)).toBe(0);
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
