import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as acsRoute from "../../app/routes/api.auth.sso.$id.saml.acs.ts";
import * as metadataRoute from "../../app/routes/api.auth.sso.$id.saml.metadata.ts";
import * as ssoStart from "../../app/routes/api.auth.sso.$id.ts";
import * as ssoLookup from "../../app/routes/api.auth.sso.ts";
import * as user from "../../app/routes/api.user.ts";
import { createUser } from "../../app/server/accounts/users.server.ts";
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
import { type SignedResponse, startTestSamlIdp, type TestSamlIdp } from "../helpers/saml-idp.ts";
import { ensureUser } from "../helpers/users.ts";
import {
  idpMetadataXml,
  OTHER_CERT,
  OTHER_KEY,
  TEST_IDP_CERT,
  TEST_IDP_KEY,
} from "./saml-fixtures.ts";

// An organisation's SAML 2.0 sign-in (issue 49, decision 0211) against a real SAML identity
// provider (samlify) on loopback: our metadata given to it, SP-initiated (our AuthnRequest and
// RelayState, its signed answer to our ACS) and IdP-initiated; and the refusals: a tampered, a
// replayed, a wrongly addressed and an expired assertion each land on the sign-in page with a
// reason, without a session.

const APP = "http://app.test";
const OWNER = "usr_saml_owner";
let idp: TestSamlIdp;
let org: string;
let serial = 0;

beforeAll(async () => {
  process.env.APP_URL = APP;
  resetEnvCache();
  await ensureUser(OWNER);
  org = (await createOrganisation(OWNER, "Globex")).organisation.id;
  await assignPlan(org, "network", "usr_saml_operator");
  idp = await startTestSamlIdp({
    privateKey: TEST_IDP_KEY,
    certificate: TEST_IDP_CERT,
    groupsAttribute: "memberOf",
  });
  await setSsoConnection(org, OWNER, {
    protocol: "saml",
    slug: "globex",
    enabled: true,
    metadataXml: idpMetadataXml(idp.entityId, idp.ssoUrl),
    groupsAttribute: "memberOf",
    groupRoles: { "globex-admins": "admin", "globex-staff": "member" },
    defaultRole: "viewer",
  });
  const metadata = await call(metadataRoute, `/api/auth/sso/${org}/saml/metadata`, {
    params: { id: org },
  });
  idp.trust(metadata.text);
  // Accounts are made by SSO only at the organisation's verified domains.
  await db()`insert into organisation_domains (id, organisation_id, domain, token, verified_at)
    values ('dom_saml_globex', ${org}, 'globex.test', 'test-token', now())`;
});
beforeEach(() => {
  idp.override = undefined;
  idp.tamper = undefined;
  resetRateLimiters();
  serial++;
  idp.user = {
    nameId: `person-${serial}@globex.test`,
    email: `person-${serial}@globex.test`,
    name: `Person ${serial}`,
    groups: ["globex-staff"],
  };
});
afterAll(async () => {
  delete process.env.APP_URL;
  resetEnvCache();
  await idp.close();
});

/** Our start, then the IdP's answer to our AuthnRequest. */
async function spInitiated(): Promise<SignedResponse> {
  const start = await call(ssoStart, `/api/auth/sso/${org}`, { params: { id: org } });
  expect(start.status).toBe(302);
  const location = start.headers.get("location")!;
  expect(location.startsWith(`${idp.ssoUrl}?`)).toBe(true);
  return idp.answer(location);
}

/** The browser's POST of the IdP's form to our ACS. */
function post(response: SignedResponse) {
  const form = new URLSearchParams({ SAMLResponse: response.samlResponse });
  if (response.relayState) form.set("RelayState", response.relayState);
  return call(acsRoute, new URL(response.acsUrl).pathname, {
    method: "POST",
    params: { id: org },
    rawBody: form.toString(),
    headers: { "content-type": "application/x-www-form-urlencoded" },
  });
}

const sessionOf = (res: { headers: Headers }) =>
  res.headers
    .getSetCookie()
    .find((c) => c.startsWith("__session=") && !/Max-Age=0/i.test(c))
    ?.split(";")[0];

async function refused(res: Awaited<ReturnType<typeof post>>, reason: string) {
  expect(res.status).toBe(302);
  expect(res.headers.get("location")).toBe(`/signin?error=${reason}`);
  expect(sessionOf(res)).toBeUndefined();
}

const accountOf = async (email: string) =>
  (await db()<{ id: string }[]>`select id from users where email = ${email}`)[0];

describe("organisation SAML sign-in", () => {
  it("publishes SP metadata at a stable URL: entity id, ACS (HTTP-POST), signed assertions wanted", async () => {
    const res = await call(metadataRoute, `/api/auth/sso/${org}/saml/metadata`, {
      params: { id: org },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/samlmetadata\+xml/);
    expect(res.text).toContain(`entityID="${APP}/api/auth/sso/${org}/saml/metadata"`);
    expect(res.text).toContain(`Location="${APP}/api/auth/sso/${org}/saml/acs"`);
    expect(res.text).toContain('WantAssertionsSigned="true"');
  });

  it("signs in SP-initiated: AuthnRequest and RelayState out, the signed answer in; the account is made and a member", async () => {
    const answer = await spInitiated();
    expect(answer.relayState).toBe(`/organizations/${org}`);
    const res = await post(answer);
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe(`/organizations/${org}`);
    const me = await call(user, "/api/user", { headers: { cookie: sessionOf(res)! } });
    expect(me.json.user.email).toBe(idp.user.email);
    const account = await accountOf(idp.user.email);
    expect((await membershipOf(org, account!.id))?.role).toBe("member");
    // Our request was answered: its id is not awaited any more.
    const [open] = await db()`select 1 from saml_requests where organisation_id = ${org}`;
    expect(open).toBeUndefined();
  });

  it("signs in IdP-initiated (no request), with the mapped role", async () => {
    idp.user.groups = ["globex-admins", "globex-staff"];
    const res = await post(await idp.idpInitiated());
    expect(res.status).toBe(302);
    expect(sessionOf(res)).toBeDefined();
    const account = await accountOf(idp.user.email);
    expect((await membershipOf(org, account!.id))?.role).toBe("admin");
  });

  it("signs the same person into the same account when the IdP's NameID changes (transient)", async () => {
    idp.user.nameId = `_transient-${serial}-a`;
    expect(sessionOf(await post(await idp.idpInitiated()))).toBeDefined();
    const account = await accountOf(idp.user.email);
    idp.user.nameId = `_transient-${serial}-b`;
    const again = await post(await idp.idpInitiated());
    expect(again.headers.get("location")).toBe(`/organizations/${org}`);
    expect(await accountOf(idp.user.email)).toEqual(account);
    const [identity] = await db()<{ subject: string }[]>`
      select subject from sso_identities where user_id = ${account!.id}`;
    expect(identity!.subject).toBe(idp.user.nameId);
  });

  it("with the organisation's verified domain: found by a work email, and links an existing account there", async () => {
    await db()`insert into organisation_domains (id, organisation_id, domain, token, verified_at)
      values ('dom_saml_globex', ${org}, 'globex.test', 'test-token', now())
      on conflict do nothing`;
    const lookup = await call(ssoLookup, "/api/auth/sso?org=someone%40Globex.test");
    expect(lookup.headers.get("location")).toBe(`/api/auth/sso/${org}`);
    const elsewhere = await call(ssoLookup, "/api/auth/sso?org=someone%40elsewhere.test");
    expect(elsewhere.headers.get("location")).toBe("/signin?error=sso_unknown");
    // An account made before the organisation's sign-in (by password, by an invitation).
    const before = await createUser({ email: idp.user.email, name: "Made before" });
    const res = await post(await idp.idpInitiated());
    expect(res.headers.get("location")).toBe(`/organizations/${org}`);
    expect((await accountOf(idp.user.email))?.id).toBe(before.id);
    expect((await membershipOf(org, before.id))?.role).toBe("member");
    // Another organisation's address is still refused.
    idp.user.email = `someone-${serial}@example.com`;
    idp.user.nameId = idp.user.email;
    await createUser({ email: idp.user.email, name: "Not theirs" });
    await refused(await post(await idp.idpInitiated()), "sso_conflict");
  });

  it("refuses a tampered assertion (its signature no longer verifies)", async () => {
    idp.tamper = (xml) => xml.replaceAll(idp.user.email, "ceo@globex.test");
    await refused(await post(await spInitiated()), "saml_signature");
    expect(await accountOf("ceo@globex.test")).toBeUndefined();
  });

  it("refuses an unsigned response, and one signed by another key", async () => {
    idp.tamper = (xml) => xml.replace(/<ds:Signature[\s\S]*?<\/ds:Signature>/g, "");
    await refused(await post(await idp.idpInitiated()), "saml_signature");
    const impostor = await startTestSamlIdp({ privateKey: OTHER_KEY, certificate: OTHER_CERT });
    try {
      const metadata = await call(metadataRoute, `/api/auth/sso/${org}/saml/metadata`, {
        params: { id: org },
      });
      impostor.trust(metadata.text);
      impostor.user = idp.user;
      await refused(await post(await impostor.idpInitiated()), "saml_signature");
    } finally {
      await impostor.close();
    }
  });

  it("refuses a replayed assertion", async () => {
    const answer = await idp.idpInitiated();
    expect((await post(answer)).status).toBe(302);
    await refused(await post(answer), "saml_replay");
  });

  it("refuses an assertion for another audience", async () => {
    idp.override = (v) => ({ ...v, Audience: "https://another-sp.example.com" });
    await refused(await post(await spInitiated()), "saml_audience");
  });

  it("refuses an expired assertion (past NotOnOrAfter and the minute of skew)", async () => {
    const past = new Date(Date.now() - 5 * 60_000).toISOString();
    const earlier = new Date(Date.now() - 10 * 60_000).toISOString();
    idp.override = (v) => ({
      ...v,
      IssueInstant: earlier,
      ConditionsNotBefore: earlier,
      ConditionsNotOnOrAfter: past,
      SubjectConfirmationDataNotOnOrAfter: past,
    });
    await refused(await post(await idp.idpInitiated()), "saml_expired");
  });

  it("refuses an assertion for another recipient or destination", async () => {
    idp.override = (v) => ({ ...v, SubjectRecipient: "https://elsewhere.example.com/acs" });
    await refused(await post(await idp.idpInitiated()), "saml_invalid");
    idp.override = (v) => ({ ...v, Destination: "https://elsewhere.example.com/acs" });
    await refused(await post(await idp.idpInitiated()), "saml_invalid");
  });

  it("refuses a new member when the organisation has no seat left, and says so", async () => {
    // Without a plan an organisation has one seat, its owner's.
    const tiny = (await createOrganisation(OWNER, "Tiny")).organisation.id;
    await setSsoConnection(tiny, OWNER, {
      protocol: "saml",
      slug: "tiny",
      enabled: true,
      metadataXml: idpMetadataXml(idp.entityId, idp.ssoUrl),
      groupsAttribute: "memberOf",
      groupRoles: {},
      defaultRole: "member",
    });
    const metadata = await call(metadataRoute, `/api/auth/sso/${tiny}/saml/metadata`, {
      params: { id: tiny },
    });
    idp.trust(metadata.text);
    await db()`insert into organisation_domains (id, organisation_id, domain, token, verified_at)
      values ('dom_saml_tiny', ${tiny}, 'tiny.test', 'test-token', now())`;
    idp.user.email = `person-${serial}@tiny.test`;
    idp.user.nameId = idp.user.email;
    try {
      const answer = await idp.idpInitiated();
      const form = new URLSearchParams({ SAMLResponse: answer.samlResponse });
      const res = await call(acsRoute, `/api/auth/sso/${tiny}/saml/acs`, {
        method: "POST",
        params: { id: tiny },
        rawBody: form.toString(),
        headers: { "content-type": "application/x-www-form-urlencoded" },
      });
      await refused(res, "sso_seats");
      // Nothing half-made: no account, no identity.
      expect(await accountOf(idp.user.email)).toBeUndefined();
    } finally {
      const ours = await call(metadataRoute, `/api/auth/sso/${org}/saml/metadata`, {
        params: { id: org },
      });
      idp.trust(ours.text);
    }
  });

  it("refuses an answer to a request we never sent (InResponseTo)", async () => {
    idp.override = (v) => ({ ...v, InResponseTo: "_a-request-we-never-made" });
    await refused(await post(await spInitiated()), "saml_request");
  });
});
