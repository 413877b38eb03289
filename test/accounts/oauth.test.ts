import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as oauth1 from "../../app/routes/api.auth.oauth1.ts";
import * as oauth2 from "../../app/routes/api.auth.oauth2.ts";
import * as keys from "../../app/routes/api.keys.ts";
import * as user from "../../app/routes/api.user.ts";
import { addWebauthnCredential } from "../../app/server/identity/verification.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { call, type RouteModule } from "../helpers/api.ts";
import { github } from "../msw/handlers/github.ts";
import { google } from "../msw/handlers/google-oauth.ts";
import type { FakeProvider } from "../msw/handlers/oauth-common.ts";
import { as, cookieOf, newUser, registerUser, signInUser, uniqueEmail } from "./helpers.ts";

// The whole browser dance against msw fakes of Google (oauth1) and GitHub (oauth2): our route
// redirects to the provider's authorize URL, the provider redirects back with code + state,
// our callback exchanges the code (with the PKCE verifier) and reads the profile.
const APP = "http://app.test";

beforeAll(() => {
  Object.assign(process.env, {
    APP_URL: APP,
    OAUTH1_CLIENT_ID: google.clientId,
    OAUTH1_CLIENT_SECRET: google.clientSecret,
    OAUTH2_CLIENT_ID: github.clientId,
    OAUTH2_CLIENT_SECRET: github.clientSecret,
  });
  resetEnvCache();
});

afterAll(() => {
  for (const k of [
    "APP_URL",
    "OAUTH1_CLIENT_ID",
    "OAUTH1_CLIENT_SECRET",
    "OAUTH2_CLIENT_ID",
    "OAUTH2_CLIENT_SECRET",
  ]) {
    delete process.env[k];
  }
  resetEnvCache();
});

beforeEach(() => {
  google.tokenRequests.length = 0;
  github.tokenRequests.length = 0;
});

const providers: Array<[string, RouteModule, FakeProvider, string]> = [
  ["oauth1", oauth1, google, "https://accounts.google.com/o/oauth2/v2/auth"],
  ["oauth2", oauth2, github, "https://github.com/login/oauth/authorize"],
];

let accountId = 1000;
const account = (email: string, emailVerified = true) => ({
  id: String(++accountId),
  email,
  emailVerified,
  name: `Person ${accountId}`,
});

/** Runs the flow; returns our callback's response. */
async function signInWith(name: string, route: RouteModule) {
  const start = await call(route, `/api/auth/${name}`);
  expect(start.status).toBe(302);
  const stateCookies = start.headers
    .getSetCookie()
    .map((c) => c.split(";")[0]!)
    .join("; ");
  const atProvider = await fetch(start.headers.get("location")!, { redirect: "manual" });
  expect(atProvider.status).toBe(302);
  const back = new URL(atProvider.headers.get("location")!);
  expect(back.origin + back.pathname).toBe(`${APP}/api/auth/${name}`);
  return call(route, back.pathname + back.search, { headers: { cookie: stateCookies } });
}

describe.each(providers)("OAuth %s", (name, route, provider, authorizeUrl) => {
  it("redirects to the provider with state and a PKCE S256 challenge, in a short-lived cookie", async () => {
    const res = await call(route, `/api/auth/${name}`);
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get("location")!);
    expect(location.origin + location.pathname).toBe(authorizeUrl);
    expect(location.searchParams.get("client_id")).toBe(provider.clientId);
    expect(location.searchParams.get("redirect_uri")).toBe(`${APP}/api/auth/${name}`);
    expect(location.searchParams.get("code_challenge_method")).toBe("S256");
    expect(location.searchParams.get("code_challenge")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(location.searchParams.get("state")).toBeTruthy();
    const cookie = res.headers.getSetCookie()[0]!;
    expect(cookie).toMatch(new RegExp(`^oauth_${name}:`));
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/Max-Age=300/);
  });

  it("creates a user on first sign-in, signs in, and finds the same user the next time", async () => {
    const email = uniqueEmail(name);
    provider.nextAccount = account(email);
    const res = await signInWith(name, route);
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/settings");
    expect(provider.tokenRequests).toEqual([{ ok: true }]);
    const me = await as({ cookie: cookieOf(res) }, user, "/api/user");
    expect(me.status).toBe(200);
    expect(me.json.user).toMatchObject({ email, name: provider.nextAccount.name, plan: "free" });
    const again = await signInWith(name, route);
    const me2 = await as({ cookie: cookieOf(again) }, user, "/api/user");
    expect(me2.json.user.id).toBe(me.json.user.id);
    expect(await db()`select 1 from users where lower(email) = lower(${email})`).toHaveLength(1);
    const [created] = await db()`select count(*)::int as n from events
      where type = 'user.created' and data->>'id' = ${me.json.user.id}`;
    expect(created?.n).toBe(1);
  });

  it("links an existing user with the same verified email instead of duplicating it", async () => {
    const email = uniqueEmail(`${name}-link`);
    const existing = await registerUser({ email, password: "password123" });
    provider.nextAccount = account(email.toUpperCase());
    const res = await signInWith(name, route);
    expect(res.headers.get("location")).toBe("/settings");
    const me = await as({ cookie: cookieOf(res) }, user, "/api/user");
    expect(me.json.user.id).toBe(existing.json.id);
    expect(await db()`select 1 from users where lower(email) = lower(${email})`).toHaveLength(1);
    const links =
      await db()`select provider from oauth_accounts where user_id = ${existing.json.id}`;
    expect(links).toEqual([{ provider: name }]);
  });

  it("takes over a pre-registered account whose email we never verified: password, sessions, keys and authenticators stop working", async () => {
    // Someone registers the victim's address with their own password, signs in, makes a key and
    // registers an authenticator...
    const squatter = await newUser({ email: uniqueEmail(`${name}-squat`) });
    const key = await as(squatter, keys, "/api/keys", { method: "POST", body: { name: "k" } });
    expect(key.status).toBe(201);
    expect((await as({ key: key.json.key }, user, "/api/user")).status).toBe(200);
    expect(
      await addWebauthnCredential(squatter.id, {
        id: `cred-${squatter.id}`,
        publicKey: new Uint8Array([1, 2, 3]),
      }),
    ).toBe(true);
    // ...then the address's owner signs in with the provider, which has verified it.
    provider.nextAccount = account(squatter.email);
    const res = await signInWith(name, route);
    expect(res.headers.get("location")).toBe("/settings");
    const me = await as({ cookie: cookieOf(res) }, user, "/api/user");
    expect(me.status).toBe(200);
    expect(me.json.user.id).toBe(squatter.id);

    expect((await signInUser(squatter.email, squatter.password)).status).toBe(401);
    expect((await as({ cookie: squatter.cookie }, user, "/api/user")).status).toBe(401);
    expect((await as({ key: key.json.key }, user, "/api/user")).status).toBe(401);
    const [row] = await db()`
      select email_verified, password_hash from users where id = ${squatter.id}`;
    expect(row).toEqual({ email_verified: true, password_hash: null });
    expect(await db()`select 1 from api_keys where user_id = ${squatter.id}`).toHaveLength(0);
    expect(
      await db()`select 1 from webauthn_credentials where user_id = ${squatter.id}`,
    ).toHaveLength(0);
    expect(await db()`select provider from oauth_accounts where user_id = ${squatter.id}`).toEqual([
      { provider: name },
    ]);
    // The owner's own session is unaffected, and the next sign-in finds the same user.
    const again = await signInWith(name, route);
    expect((await as({ cookie: cookieOf(again) }, user, "/api/user")).json.user.id).toBe(
      squatter.id,
    );
    expect((await as({ cookie: cookieOf(res) }, user, "/api/user")).status).toBe(200);
  });

  it("links an account whose email is already verified without touching its password, sessions or keys", async () => {
    const owner = await newUser({ email: uniqueEmail(`${name}-verified`) });
    const key = await as(owner, keys, "/api/keys", { method: "POST", body: { name: "k" } });
    expect(key.status).toBe(201);
    // Verified earlier (e.g. by a sign-in with the other provider).
    await db()`update users set email_verified = true where id = ${owner.id}`;
    provider.nextAccount = account(owner.email);
    const res = await signInWith(name, route);
    expect(res.headers.get("location")).toBe("/settings");
    expect((await as({ cookie: cookieOf(res) }, user, "/api/user")).json.user.id).toBe(owner.id);
    expect((await signInUser(owner.email, owner.password)).status).toBe(200);
    expect((await as({ cookie: owner.cookie }, user, "/api/user")).status).toBe(200);
    expect((await as({ key: key.json.key }, user, "/api/user")).status).toBe(200);
  });

  it("refuses an email the provider has not verified", async () => {
    provider.nextAccount = account(uniqueEmail(`${name}-unverified`), false);
    const res = await signInWith(name, route);
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/signin?error=oauth_unverified");
    expect(res.headers.getSetCookie().some((c) => c.startsWith("__session="))).toBe(false);
  });

  it("sends a denied consent back to the sign-in page, without a session", async () => {
    provider.nextAccount = undefined;
    const res = await signInWith(name, route);
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/signin?error=oauth_denied");
    expect(res.headers.getSetCookie().some((c) => c.startsWith("__session="))).toBe(false);
    expect(provider.tokenRequests).toEqual([]);
  });

  it("refuses a callback whose state does not match the cookie (CSRF)", async () => {
    provider.nextAccount = account(uniqueEmail(name));
    const start = await call(route, `/api/auth/${name}`);
    const atProvider = await fetch(start.headers.get("location")!, { redirect: "manual" });
    const back = new URL(atProvider.headers.get("location")!);
    const res = await call(route, back.pathname + back.search); // no state cookie
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/signin?error=oauth_failed");
    expect(provider.tokenRequests).toEqual([]);
  });
});

describe("an unconfigured provider", () => {
  it("answers 503 with a clear error", async () => {
    delete process.env.OAUTH2_CLIENT_SECRET;
    resetEnvCache();
    try {
      const res = await call(oauth2, "/api/auth/oauth2");
      expect(res.status).toBe(503);
      expect(res.json).toEqual({
        error: "Sign-in with oauth2 (GitHub) is not configured on this server",
      });
    } finally {
      process.env.OAUTH2_CLIENT_SECRET = github.clientSecret;
      resetEnvCache();
    }
  });
});
