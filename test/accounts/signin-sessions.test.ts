import { afterEach, describe, expect, it } from "vitest";
import * as signout from "../../app/routes/api.auth.signout.ts";
import * as sessionsById from "../../app/routes/api.sessions.$id.ts";
import * as sessions from "../../app/routes/api.sessions.ts";
import * as settings from "../../app/routes/api.settings.ts";
import * as user from "../../app/routes/api.user.ts";
import { SESSION_LIFETIME_SECONDS } from "../../app/server/accounts/sessions.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { rateLimitScopes } from "../../app/server/platform/rate-limit.server.ts";
import { call } from "../helpers/api.ts";
import { as, cookieOf, newUser, registerUser, signInUser, uniqueEmail } from "./helpers.ts";

describe("POST /api/auth/callback/credentials", () => {
  afterEach(() => {
    delete process.env.APP_URL;
    resetEnvCache();
  });

  it("signs in with a JSON body and sets an httpOnly, SameSite=Lax session cookie", async () => {
    const email = uniqueEmail();
    await registerUser({ email, password: "password123" });
    const res = await signInUser(email.toUpperCase(), "password123");
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ success: true, user: { email } });
    const set = res.headers.getSetCookie().find((c) => c.startsWith("__session="))!;
    expect(set).toMatch(/HttpOnly/i);
    expect(set).toMatch(/SameSite=Lax/i);
    expect(set).toMatch(new RegExp(`Max-Age=${SESSION_LIFETIME_SECONDS}`));
    expect(set).not.toMatch(/Secure/i);
    const me = await as({ cookie: cookieOf(res) }, user, "/api/user");
    expect(me.status).toBe(200);
    expect(me.json).toEqual({
      success: true,
      user: {
        id: expect.any(String),
        email,
        name: email,
        plan: "free",
        createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      },
    });
  });

  it("accepts a form body", async () => {
    const email = uniqueEmail();
    await registerUser({ email, password: "password123" });
    const res = await call(
      await import("../../app/routes/api.auth.callback.credentials.ts"),
      "/api/auth/callback/credentials",
      {
        method: "POST",
        rawBody: new URLSearchParams({ email, password: "password123" }).toString(),
        headers: { "content-type": "application/x-www-form-urlencoded" },
      },
    );
    expect(res.status).toBe(200);
    expect(cookieOf(res)).toMatch(/^__session=/);
  });

  it("marks the cookie Secure when the app is served over https", async () => {
    process.env.APP_URL = "https://agents.example.com";
    resetEnvCache();
    const email = uniqueEmail();
    await registerUser({ email, password: "password123" });
    const res = await signInUser(email, "password123");
    expect(res.headers.getSetCookie().find((c) => c.startsWith("__session="))).toMatch(/Secure/);
  });

  it("answers 401 with one message for an unknown email and a wrong password", async () => {
    const email = uniqueEmail();
    await registerUser({ email, password: "password123" });
    const wrong = await signInUser(email, "password124");
    const unknown = await signInUser(uniqueEmail("nobody"), "password123");
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    expect(wrong.json).toEqual({ error: "Invalid email or password" });
    expect(unknown.json).toEqual(wrong.json);
    expect(wrong.headers.getSetCookie()).toEqual([]);
  });

  it("answers 400 for missing fields", async () => {
    const res = await signInUser("", "");
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/^email: /);
  });

  it("slows down repeated failures for one email (429 + Retry-After), even for the right password", async () => {
    const email = uniqueEmail();
    await registerUser({ email, password: "password123" });
    const { points } = rateLimitScopes["signin-failures"];
    for (let i = 0; i < points; i++) {
      expect((await signInUser(email, `wrong-${i}`)).status).toBe(401);
    }
    const blocked = await signInUser(email, "password123");
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get("retry-after"))).toBeGreaterThan(0);
    // Other accounts are unaffected.
    const other = uniqueEmail();
    await registerUser({ email: other, password: "password123" });
    expect((await signInUser(other, "password123")).status).toBe(200);
  });

  it("clears the failure count on success", async () => {
    const email = uniqueEmail();
    await registerUser({ email, password: "password123" });
    const { points } = rateLimitScopes["signin-failures"];
    for (let i = 0; i < points - 1; i++) await signInUser(email, "nope");
    expect((await signInUser(email, "password123")).status).toBe(200);
    for (let i = 0; i < points - 1; i++) await signInUser(email, "nope");
    expect((await signInUser(email, "password123")).status).toBe(200);
  });

  it("refuses a sign-in form posted from another site", async () => {
    const email = uniqueEmail();
    await registerUser({ email, password: "password123" });
    const res = await signInUser(email, "password123", {
      headers: { origin: "https://evil.example" },
    });
    expect(res.status).toBe(403);
  });
});

describe("sessions", () => {
  it("answers 401 without a credential and with a forged cookie", async () => {
    expect((await call(user, "/api/user")).status).toBe(401);
    const forged = await call(user, "/api/user", { headers: { cookie: "__session=abc.def" } });
    expect(forged.status).toBe(401);
    expect(forged.json).toEqual({ error: "Authentication required" });
  });

  it("signs out: the session is revoked server-side, the cookie cleared", async () => {
    const u = await newUser();
    const res = await as(u, signout, "/api/auth/signout", { method: "POST" });
    expect(res.status).toBe(200);
    expect(res.headers.getSetCookie()[0]).toMatch(/^__session=;.*Max-Age=0/);
    // The old cookie no longer works even if the browser kept it.
    expect((await as(u, user, "/api/user")).status).toBe(401);
    const [row] = await db()`select count(*)::int as n from sessions
      where user_id = ${u.id} and revoked_at is not null`;
    expect(row?.n).toBe(1);
  });

  it("lists a user's sessions and revokes one by id; another user's session is 404", async () => {
    const u = await newUser();
    const second = cookieOf(
      await signInUser(u.email, u.password, {
        headers: { "user-agent": "Mozilla/5.0 second browser" },
      }),
    );
    const list = await as(u, sessions, "/api/sessions");
    expect(list.status).toBe(200);
    expect(list.json.sessions).toHaveLength(2);
    const current = list.json.sessions.find((s: { current: boolean }) => s.current);
    const other = list.json.sessions.find((s: { current: boolean }) => !s.current);
    expect(current.id).toMatch(/^ses_/);
    expect(other.userAgent).toBe("Mozilla/5.0 second browser");

    const stranger = await newUser();
    const foreign = await as(stranger, sessionsById, `/api/sessions/${other.id}`, {
      method: "DELETE",
      params: { id: other.id },
    });
    expect(foreign.status).toBe(404);

    const revoked = await as(u, sessionsById, `/api/sessions/${other.id}`, {
      method: "DELETE",
      params: { id: other.id },
    });
    expect(revoked.status).toBe(200);
    expect((await as({ cookie: second }, user, "/api/user")).status).toBe(401);
    expect((await as(u, user, "/api/user")).status).toBe(200);
  });

  it("rolls the expiry forward (at most hourly) and re-sends the cookie", async () => {
    const u = await newUser();
    const quiet = await as(u, user, "/api/user");
    expect(quiet.headers.getSetCookie()).toEqual([]);
    await db()`update sessions set last_seen_at = now() - interval '2 hours',
      expires_at = now() + interval '1 day' where user_id = ${u.id}`;
    const rolled = await as(u, user, "/api/user");
    expect(rolled.status).toBe(200);
    expect(rolled.headers.getSetCookie()[0]).toMatch(/^__session=.*Max-Age=2592000/);
    const [row] = await db()`select expires_at from sessions where user_id = ${u.id}`;
    expect((row!.expires_at as Date).getTime()).toBeGreaterThan(Date.now() + 29 * 86_400_000);
  });

  it("does not accept an expired session", async () => {
    const u = await newUser();
    await db()`update sessions set expires_at = now() - interval '1 second' where user_id = ${u.id}`;
    expect((await as(u, user, "/api/user")).status).toBe(401);
  });

  it("refuses cookie-authenticated state changes from another site, allows same-origin ones", async () => {
    const u = await newUser();
    const patch = (headers: Record<string, string>) =>
      as(u, settings, "/api/settings", { method: "PATCH", body: { name: "New" }, headers });
    const evil = await patch({ origin: "https://evil.example" });
    expect(evil.status).toBe(403);
    expect(evil.json).toEqual({ error: "Cross-site request refused" });
    expect((await patch({ origin: "null" })).status).toBe(403);
    expect((await patch({ "sec-fetch-site": "cross-site" })).status).toBe(403);
    // A sibling subdomain (an agent's own site) is another site too.
    expect((await patch({ origin: "http://agent1.localhost" })).status).toBe(403);
    expect((await patch({ origin: "http://localhost:3000" })).status).toBe(200);
    expect((await patch({ origin: "http://localhost" })).status).toBe(200); // the request's own host
    expect((await patch({})).status).toBe(200); // non-browser client
    // Reads are not state changes.
    const read = await as(u, user, "/api/user", { headers: { origin: "https://evil.example" } });
    expect(read.status).toBe(200);
  });
});

describe("redirects after sign-in", () => {
  it("the sign-in page sends a signed-in visitor only to this site", async () => {
    const signin = await import("../../app/routes/signin.tsx");
    const u = await newUser();
    const visit = async (redirectTo: string) => {
      const thrown = await signin
        .loader({
          request: new Request(
            `http://localhost:3000/signin?redirectTo=${encodeURIComponent(redirectTo)}`,
            { headers: { cookie: u.cookie } },
          ),
          params: {},
          context: {},
        })
        .catch((e: unknown) => e);
      return (thrown as Response).headers.get("location");
    };
    expect(await visit("/\t/evil.example")).toBe("/settings");
    expect(await visit("/%5Cevil.example")).toBe("/settings");
    expect(await visit("/billing")).toBe("/billing");
  });
});

describe("the sign-in failure counter", () => {
  it("counts attempts up to the budget, then answers the wait; forgets a key", async () => {
    const { attempt, forgive } = await import("../../app/server/platform/rate-limit.server.ts");
    const key = "email:counted@example.com";
    for (let i = 0; i < rateLimitScopes["signin-failures"].points; i++) {
      expect(await attempt("signin-failures", key)).toBe(0);
    }
    expect(await attempt("signin-failures", key)).toBeGreaterThan(0);
    await forgive("signin-failures", key);
    expect(await attempt("signin-failures", key)).toBe(0);
  });

  it("holds a burst of concurrent guesses to the budget: each is counted before its check", async () => {
    const email = uniqueEmail();
    await registerUser({ email, password: "password123" });
    const { points } = rateLimitScopes["signin-failures"];
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => signInUser(email, `guess-${i}`)),
    );
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 401)).toHaveLength(points);
    expect(statuses.filter((s) => s === 429)).toHaveLength(20 - points);
    expect((await signInUser(email, "password123")).status).toBe(429);
  });
});
