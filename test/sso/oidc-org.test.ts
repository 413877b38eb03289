import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as ssoCallback from "../../app/routes/api.auth.sso.$id.oidc.callback.ts";
import * as ssoStart from "../../app/routes/api.auth.sso.$id.ts";
import * as ssoLookup from "../../app/routes/api.auth.sso.ts";
import * as user from "../../app/routes/api.user.ts";
import { resetOidcDiscovery } from "../../app/server/accounts/oidc-discovery.server.ts";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import {
  createOrganisation,
  membershipOf,
} from "../../app/server/organisations/organisations.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { setSsoConnection } from "../../app/server/sso/connections.server.ts";
import { call } from "../helpers/api.ts";
import {
  type IdpAccount,
  resign,
  startTestIdp,
  type TestIdp,
  throughProvider,
} from "../helpers/oidc-idp.ts";
import { ensureUser } from "../helpers/users.ts";

// An organisation's OpenID Connect sign-in (issue 49, decision 0210) against a real OpenID
// Provider (oidc-provider) on loopback: the slug lookup, our start, the provider's forms, our
// callback; the account made on first sign-in and made a member with the mapped role.

const APP = "http://app.test";
const OWNER = "usr_ssooidc_owner";
let idp: TestIdp;
let org: string;
const callbackUrl = () => `${APP}/api/auth/sso/${org}/oidc/callback`;

beforeAll(async () => {
  process.env.APP_URL = APP;
  resetEnvCache();
  await ensureUser(OWNER);
  org = (await createOrganisation(OWNER, "Initech")).organisation.id;
  await assignPlan(org, "network", "usr_ssooidc_operator");
  idp = await startTestIdp(callbackUrl);
  await setSsoConnection(org, OWNER, {
    protocol: "oidc",
    slug: "initech",
    enabled: true,
    issuer: idp.issuer,
    clientId: idp.clientId,
    clientSecret: idp.clientSecret,
    groupsAttribute: "groups",
    groupRoles: { "platform-admins": "admin", auditors: "viewer", engineers: "member" },
    defaultRole: "viewer",
  });
  // Accounts are made by SSO only at the organisation's verified domains.
  await db()`insert into organisation_domains (id, organisation_id, domain, token, verified_at)
    values ('dom_ssooidc_initech', ${org}, 'initech.test', 'test-token', now())`;
});
beforeEach(() => {
  idp.tamper = undefined;
  resetRateLimiters();
});
afterAll(async () => {
  delete process.env.APP_URL;
  resetEnvCache();
  resetOidcDiscovery();
  await idp.close();
});

let logins = 0;
function idpAccount(fields: IdpAccount): string {
  const login = `sso-person-${++logins}`;
  idp.accounts.set(login, fields);
  return login;
}

/** The sign-in page's form (slug), our start, the provider's forms, our callback. */
async function signIn(login: string) {
  const lookup = await call(ssoLookup, "/api/auth/sso?org=Initech");
  expect(lookup.status).toBe(302);
  expect(lookup.headers.get("location")).toBe(`/api/auth/sso/${org}`);
  const start = await call(ssoStart, `/api/auth/sso/${org}`, { params: { id: org } });
  expect(start.status).toBe(302);
  const stateCookies = start.headers
    .getSetCookie()
    .map((c) => c.split(";")[0]!)
    .join("; ");
  const back = await throughProvider(start.headers.get("location")!, login, {
    backTo: callbackUrl(),
  });
  return call(ssoCallback, back.pathname + back.search, {
    params: { id: org },
    headers: { cookie: stateCookies },
  });
}

const sessionOf = (res: { headers: Headers }) =>
  res.headers
    .getSetCookie()
    .find((c) => c.startsWith("__session=") && !/Max-Age=0/i.test(c))
    ?.split(";")[0];

describe("organisation OIDC sign-in", () => {
  it("starts at the organisation's provider with state, nonce and PKCE, its state cookie on its own path", async () => {
    const res = await call(ssoStart, `/api/auth/sso/${org}`, { params: { id: org } });
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get("location")!);
    expect(location.origin).toBe(idp.issuer);
    expect(location.searchParams.get("redirect_uri")).toBe(callbackUrl());
    expect(location.searchParams.get("code_challenge_method")).toBe("S256");
    expect(location.searchParams.get("nonce")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const cookie = res.headers.getSetCookie()[0]!;
    expect(cookie).toMatch(new RegExp(`^oauth_sso_${org}:`));
    expect(cookie).toContain(`Path=/api/auth/sso/${org}/oidc`);
  });

  it("makes the account on first sign-in, a member with the highest mapped role", async () => {
    const email = `new-${Date.now()}@initech.test`;
    const login = idpAccount({
      email,
      email_verified: true,
      name: "Peter Gibbons",
      groups: ["engineers", "platform-admins", "unmapped"],
    });
    const res = await signIn(login);
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe(`/organizations/${org}`);
    const session = sessionOf(res);
    expect(session).toBeDefined();
    const me = await call(user, "/api/user", { headers: { cookie: session! } });
    expect(me.json.user.email).toBe(email);
    const [account] = await db()<{ id: string; email_verified: boolean }[]>`
      select id, email_verified from users where email = ${email}`;
    // The organisation's provider vouches for its people here, not for the address install-wide.
    expect(account!.email_verified).toBe(false);
    expect((await membershipOf(org, account!.id))?.role).toBe("admin");
    const [identity] = await db()<{ subject: string; groups: string[] }[]>`
      select subject, groups from sso_identities where user_id = ${account!.id}`;
    expect(identity!.subject).toBe(`${idp.issuer}#${login}`);
    expect(identity!.groups).toEqual(["engineers", "platform-admins", "unmapped"]);

    // The groups change at the provider: the role follows at the next sign-in.
    idp.accounts.set(login, { email, email_verified: true, groups: ["auditors"] });
    expect((await signIn(login)).status).toBe(302);
    expect((await membershipOf(org, account!.id))?.role).toBe("viewer");
    const audit = await db()<{ action: string }[]>`
      select action from audit_log where user_id = ${org} and target = ${account!.id}
      order by id`;
    expect(audit.map((a) => a.action)).toEqual(["member.added", "member.role_changed"]);
  });

  it("gives the default role when no group matches", async () => {
    const email = `plain-${Date.now()}@initech.test`;
    const res = await signIn(idpAccount({ email, groups: ["nothing-mapped"] }));
    expect(res.status).toBe(302);
    const [account] = await db()<{ id: string }[]>`select id from users where email = ${email}`;
    expect((await membershipOf(org, account!.id))?.role).toBe("viewer");
  });

  it("never signs into an existing account it did not make (an organisation's IdP could claim any address)", async () => {
    const victim = "usr_ssooidc_victim";
    await ensureUser(victim);
    const res = await signIn(idpAccount({ email: `${victim}@example.com`, email_verified: true }));
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/signin?error=sso_conflict");
    expect(sessionOf(res)).toBeUndefined();
    expect(await membershipOf(org, victim)).toBeUndefined();
  });

  it("makes no account at a domain the organisation has not verified (no pre-registering someone else's address)", async () => {
    const email = `outsider-${Date.now()}@elsewhere.test`;
    const res = await signIn(idpAccount({ email, email_verified: true }));
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/signin?error=sso_domain");
    expect(sessionOf(res)).toBeUndefined();
    expect(await db()`select 1 from users where email = ${email}`).toHaveLength(0);
  });

  it("refuses an ID token with a wrong nonce", async () => {
    idp.tamper = resign(idp, (claims) => ({ ...claims, nonce: "someone-elses" }));
    const res = await signIn(idpAccount({ email: `nonce-${Date.now()}@initech.test` }));
    expect(res.headers.get("location")).toBe("/signin?error=oidc_token");
    expect(sessionOf(res)).toBeUndefined();
  });

  it("sends the browser back with a reason when the organisation's provider cannot be reached", async () => {
    const other = (await createOrganisation(OWNER, "Offline Co")).organisation.id;
    await setSsoConnection(other, OWNER, {
      protocol: "oidc",
      slug: "offline-co",
      enabled: true,
      issuer: "http://127.0.0.1:1",
      clientId: "c",
      clientSecret: "s",
      groupsAttribute: "groups",
      groupRoles: {},
      defaultRole: "member",
    });
    const res = await call(ssoStart, `/api/auth/sso/${other}`, { params: { id: other } });
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/signin?error=sso_failed");
  });

  it("sends an unknown slug back to the sign-in page", async () => {
    const res = await call(ssoLookup, "/api/auth/sso?org=nobody-here");
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/signin?error=sso_unknown");
  });
});
