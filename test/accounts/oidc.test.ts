import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as oidcCallback from "../../app/routes/api.auth.oidc.callback.ts";
import * as oidcStart from "../../app/routes/api.auth.oidc.ts";
import * as user from "../../app/routes/api.user.ts";
import * as opsUsers from "../../app/routes/ops.users._index.tsx";
import { loader as signinLoader } from "../../app/routes/signin.tsx";
import { loader as signupLoader } from "../../app/routes/signup.tsx";
import { resetOidcDiscovery } from "../../app/server/accounts/oidc-discovery.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { type CallResult, call } from "../helpers/api.ts";
import {
  type IdpAccount,
  resign,
  startTestIdp,
  type TestIdp,
  throughProvider,
} from "../helpers/oidc-idp.ts";
import { getPage } from "../ops/support.ts";
import { as, cookieOf, registerUser, uniqueEmail } from "./helpers.ts";

// Install-wide OpenID Connect sign-in (issue 49, decision 0205) against a real OpenID Provider
// (oidc-provider) on loopback: our start route, the provider's login and consent forms, our
// callback, with the browser's cookies carried by hand on both sides.
const APP = "http://app.test";
const CALLBACK = `${APP}/api/auth/oidc/callback`;
const OIDC_VARS = [
  "APP_URL",
  "OIDC_ISSUER",
  "OIDC_CLIENT_ID",
  "OIDC_CLIENT_SECRET",
  "OIDC_NAME",
  "OIDC_SCOPES",
  "OPERATOR_EMAILS",
] as const;

let idp: TestIdp;

beforeAll(async () => {
  idp = await startTestIdp(CALLBACK);
});

afterAll(async () => {
  for (const k of OIDC_VARS) delete process.env[k];
  resetEnvCache();
  resetOidcDiscovery();
  await idp.close();
});

function configure(extra: Record<string, string> = {}) {
  Object.assign(process.env, {
    APP_URL: APP,
    OIDC_ISSUER: idp.issuer,
    OIDC_CLIENT_ID: idp.clientId,
    OIDC_CLIENT_SECRET: idp.clientSecret,
    OIDC_NAME: "Acme SSO",
    OIDC_SCOPES: "openid email profile groups",
    ...extra,
  });
  resetEnvCache();
}

let logins = 0;
/** A fresh account at the provider; returns its login. */
function idpAccount(fields: IdpAccount): string {
  const login = `person-${++logins}`;
  idp.accounts.set(login, fields);
  return login;
}

/** Our start, the provider's forms as `login`, then our callback with the state cookies. */
async function signIn(login: string, opts: { abort?: boolean } = {}) {
  const start = await call(oidcStart, "/api/auth/oidc");
  expect(start.status).toBe(302);
  const stateCookies = start.headers
    .getSetCookie()
    .map((c) => c.split(";")[0]!)
    .join("; ");
  const back = await throughProvider(start.headers.get("location")!, login, {
    backTo: CALLBACK,
    ...opts,
  });
  return {
    back,
    stateCookies,
    res: await call(oidcCallback, back.pathname + back.search, {
      headers: { cookie: stateCookies },
    }),
  };
}

const sessionSet = (res: CallResult) =>
  res.headers.getSetCookie().some((c) => c.startsWith("__session=") && !/Max-Age=0/i.test(c));

describe("OIDC sign-in, configured", () => {
  beforeAll(() => configure());
  beforeEach(() => {
    idp.tamper = undefined;
  });

  it("starts at the discovered authorization endpoint with state, nonce and PKCE S256 in a short-lived cookie", async () => {
    const res = await call(oidcStart, "/api/auth/oidc?state=ignored");
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get("location")!);
    expect(location.origin + location.pathname).toBe(`${idp.issuer}/auth`);
    expect(location.searchParams.get("client_id")).toBe(idp.clientId);
    expect(location.searchParams.get("redirect_uri")).toBe(CALLBACK);
    expect(location.searchParams.get("response_type")).toBe("code");
    expect(location.searchParams.get("scope")?.split(" ")).toEqual(
      expect.arrayContaining(["openid", "email", "groups"]),
    );
    expect(location.searchParams.get("code_challenge_method")).toBe("S256");
    expect(location.searchParams.get("code_challenge")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(location.searchParams.get("nonce")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(location.searchParams.get("state")).not.toBe("ignored");
    const cookie = res.headers.getSetCookie()[0]!;
    expect(cookie).toMatch(/^oauth_oidc:/);
    expect(cookie).toMatch(/Path=\/api\/auth\/oidc/);
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/Max-Age=300/);
  });

  it("creates the account on first sign-in, signs in, and signs into the same account the next time; the groups are kept on the link", async () => {
    const email = uniqueEmail("oidc-new");
    const login = idpAccount({
      email,
      email_verified: true,
      name: "Ada Lovelace",
      groups: ["engineering", "admins"],
    });
    const discoveries = idp.discoveryRequests;
    const { res } = await signIn(login);
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/settings");
    const me = await as({ cookie: cookieOf(res) }, user, "/api/user");
    expect(me.status).toBe(200);
    expect(me.json.user).toMatchObject({ email, name: "Ada Lovelace" });
    const [link] = await db()`
      select provider, provider_account_id, groups from oauth_accounts
      where user_id = ${me.json.user.id}`;
    expect(link).toEqual({
      provider: "oidc",
      provider_account_id: `${idp.issuer}#${login}`,
      groups: ["engineering", "admins"],
    });
    const [row] = await db()`select email_verified from users where id = ${me.json.user.id}`;
    expect(row?.email_verified).toBe(true);

    // The provider's groups changed; the second sign-in finds the same account.
    idp.accounts.set(login, { ...idp.accounts.get(login), groups: ["engineering"] });
    const again = await signIn(login);
    expect(again.res.headers.get("location")).toBe("/settings");
    const me2 = await as({ cookie: cookieOf(again.res) }, user, "/api/user");
    expect(me2.json.user.id).toBe(me.json.user.id);
    expect(await db()`select 1 from users where lower(email) = lower(${email})`).toHaveLength(1);
    const [link2] = await db()`
      select groups from oauth_accounts where user_id = ${me.json.user.id}`;
    expect(link2?.groups).toEqual(["engineering"]);
    // Discovery is cached: at most one fetch for both sign-ins.
    expect(idp.discoveryRequests - discoveries).toBeLessThanOrEqual(1);
  });

  it("links an existing account of the same email, as the OAuth sign-in does", async () => {
    const email = uniqueEmail("oidc-link");
    const existing = await registerUser({ email, password: "password123" });
    expect(existing.status).toBe(201);
    const login = idpAccount({ email: email.toUpperCase(), email_verified: true });
    const { res } = await signIn(login);
    expect(res.headers.get("location")).toBe("/settings");
    const me = await as({ cookie: cookieOf(res) }, user, "/api/user");
    expect(me.json.user.id).toBe(existing.json.id);
    const links =
      await db()`select provider, groups from oauth_accounts where user_id = ${existing.json.id}`;
    expect(links).toEqual([{ provider: "oidc", groups: null }]);
  });

  it("counts an OPERATOR_EMAILS address as verified: the new account is an operator", async () => {
    await registerUser(); // not the install's first account (that one is an operator anyway)
    const email = uniqueEmail("oidc-operator");
    configure({ OPERATOR_EMAILS: email });
    try {
      const { res } = await signIn(idpAccount({ email, email_verified: true }));
      expect((await getPage(opsUsers.loader, "/ops/users", cookieOf(res))).status).toBe(200);
      const other = await signIn(
        idpAccount({ email: uniqueEmail("oidc-not-listed"), email_verified: true }),
      );
      expect((await getPage(opsUsers.loader, "/ops/users", cookieOf(other.res))).status).toBe(403);
    } finally {
      delete process.env.OPERATOR_EMAILS;
      configure();
    }
  });

  it("refuses an email the provider has not verified, and makes no account", async () => {
    const email = uniqueEmail("oidc-unverified");
    const { res } = await signIn(idpAccount({ email, email_verified: false }));
    expect(res.headers.get("location")).toBe("/signin?error=oidc_unverified");
    expect(sessionSet(res)).toBe(false);
    expect(await db()`select 1 from users where lower(email) = lower(${email})`).toHaveLength(0);
  });

  it("refuses a callback whose state is not this browser's", async () => {
    const email = uniqueEmail("oidc-state");
    const start = await call(oidcStart, "/api/auth/oidc");
    const stateCookies = start.headers
      .getSetCookie()
      .map((c) => c.split(";")[0]!)
      .join("; ");
    const back = await throughProvider(
      start.headers.get("location")!,
      idpAccount({ email, email_verified: true }),
      { backTo: CALLBACK },
    );
    back.searchParams.set("state", "someone-elses-state");
    const res = await call(oidcCallback, back.pathname + back.search, {
      headers: { cookie: stateCookies },
    });
    expect(res.headers.get("location")).toBe("/signin?error=oidc_state");
    expect(sessionSet(res)).toBe(false);
    // No state at all is refused the same way, and starts nothing.
    const bare = await call(oidcCallback, "/api/auth/oidc/callback?code=x");
    expect(bare.headers.get("location")).toBe("/signin?error=oidc_state");
    expect(await db()`select 1 from users where lower(email) = lower(${email})`).toHaveLength(0);
  });

  it("sends a cancelled sign-in at the provider back to the sign-in page", async () => {
    const { res } = await signIn(idpAccount({ email: uniqueEmail("oidc-abort") }), {
      abort: true,
    });
    expect(res.headers.get("location")).toBe("/signin?error=oidc_denied");
    expect(sessionSet(res)).toBe(false);
  });

  const now = () => Math.floor(Date.now() / 1000);
  const refused: Array<[string, () => TestIdp["tamper"]]> = [
    ["a nonce of another attempt", () => resign(idp, (c) => ({ ...c, nonce: "another-attempt" }))],
    ["a wrong audience", () => resign(idp, (c) => ({ ...c, aud: "another-client" }))],
    [
      "an expired token (beyond the clock skew)",
      () => resign(idp, (c) => ({ ...c, iat: now() - 600, exp: now() - 120 })),
    ],
    [
      "a token issued in the future (beyond the clock skew)",
      () => resign(idp, (c) => ({ ...c, iat: now() + 300, exp: now() + 900 })),
    ],
    ["another issuer", () => resign(idp, (c) => ({ ...c, iss: "https://evil.example" }))],
    [
      "a tampered token (payload changed, signature kept)",
      () => (idToken: string) => {
        const [header, payload, signature] = idToken.split(".");
        const claims = JSON.parse(Buffer.from(payload!, "base64url").toString());
        const changed = Buffer.from(JSON.stringify({ ...claims, sub: "admin" })).toString(
          "base64url",
        );
        return `${header}.${changed}.${signature}`;
      },
    ],
    [
      "an unsigned token (alg none)",
      () => (idToken: string) => {
        const [, payload] = idToken.split(".");
        const header = Buffer.from(JSON.stringify({ alg: "none" })).toString("base64url");
        return `${header}.${payload}.`;
      },
    ],
  ];

  it.each(refused)("refuses %s in the ID token", async (_what, tamper) => {
    const email = uniqueEmail("oidc-token");
    idp.tamper = tamper();
    const { res } = await signIn(idpAccount({ email, email_verified: true }));
    expect(res.headers.get("location")).toBe("/signin?error=oidc_token");
    expect(sessionSet(res)).toBe(false);
    expect(await db()`select 1 from users where lower(email) = lower(${email})`).toHaveLength(0);
  });

  it("accepts a token whose iat is a little ahead (clock skew within a minute)", async () => {
    const email = uniqueEmail("oidc-skew");
    idp.tamper = resign(idp, (c) => ({ ...c, iat: now() + 30 }));
    const { res } = await signIn(idpAccount({ email, email_verified: true }));
    expect(res.headers.get("location")).toBe("/settings");
  });

  it("shows the button on the sign-in and sign-up pages, and explains a refusal", async () => {
    const args = (path: string) => ({
      request: new Request(`${APP}${path}`),
      params: {},
      context: {},
    });
    const signin = await signinLoader(args("/signin?error=oidc_token"));
    expect(signin.oidc).toBe("Acme SSO");
    expect(signin.error).toMatch(/did not pass our checks/);
    expect((await signupLoader(args("/signup"))).oidc).toBe("Acme SSO");
  });
});

describe("OIDC sign-in, not configured", () => {
  beforeAll(() => {
    for (const k of OIDC_VARS) delete process.env[k];
    resetEnvCache();
  });

  it("answers 503 with a clear error, and the pages show no button", async () => {
    const res = await call(oidcStart, "/api/auth/oidc");
    expect(res.status).toBe(503);
    expect(res.json).toEqual({ error: "OpenID Connect sign-in is not configured on this server" });
    const cb = await call(oidcCallback, "/api/auth/oidc/callback?code=x&state=y");
    expect(cb.status).toBe(503);
    const args = { request: new Request(`${APP}/signin`), params: {}, context: {} };
    expect((await signinLoader(args)).oidc).toBeNull();
    expect((await signupLoader(args)).oidc).toBeNull();
  });
});
