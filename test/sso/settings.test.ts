import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as ssoRoute from "../../app/routes/api.organizations.$id.sso.ts";
import * as organisationPage from "../../app/routes/organizations.$id.tsx";
import { loader as signinLoader } from "../../app/routes/signin.tsx";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import {
  addMember,
  createOrganisation,
} from "../../app/server/organisations/organisations.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import {
  connectionOf,
  setSsoConnection,
  ssoConnectionFor,
} from "../../app/server/sso/connections.server.ts";
import { call } from "../helpers/api.ts";
import { page } from "../helpers/pages.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";
import { idpMetadataXml, TEST_CERT_BASE64 } from "./saml-fixtures.ts";

// An organisation's SSO settings through the API (issue 49, decision 0210): who may see and
// change them, the client secret sealed and never shown, SAML from metadata XML or fields, the
// slug unique across organisations, every change audited.

const OWNER = "usr_sso_owner";
const ADMIN = "usr_sso_admin";
const MEMBER = "usr_sso_member";
const STRANGER = "usr_sso_stranger";

let org: string;

beforeAll(async () => {
  process.env.APP_URL = "http://app.test";
  resetEnvCache();
  for (const id of [OWNER, ADMIN, MEMBER, STRANGER]) await ensureUser(id);
  org = (await createOrganisation(OWNER, "Acme")).organisation.id;
  await assignPlan(org, "network", "usr_sso_operator");
  await addMember(org, OWNER, { email: `${ADMIN}@example.com`, role: "admin" });
  await addMember(org, OWNER, { email: `${MEMBER}@example.com`, role: "viewer" });
});
beforeEach(() => resetRateLimiters());
afterAll(() => {
  delete process.env.APP_URL;
  resetEnvCache();
});

const as = async (userId: string) => ({ cookie: await sessionCookieFor(userId) });
const path = (id: string) => `/api/organizations/${id}/sso`;
const put = async (userId: string, body: unknown, id = org) =>
  call(ssoRoute, path(id), { method: "PUT", params: { id }, headers: await as(userId), body });
const get = async (userId: string, id = org) =>
  call(ssoRoute, path(id), { params: { id }, headers: await as(userId) });

const OIDC = {
  protocol: "oidc",
  slug: "acme",
  issuer: "https://idp.example.com",
  clientId: "acme-platform",
  clientSecret: "the-client-secret-0123456789",
  groupRoles: { engineers: "member", "platform-admins": "admin" },
};

describe("organisation SSO settings", () => {
  it("starts empty, with the URLs the identity provider needs", async () => {
    const res = await get(OWNER);
    expect(res.status).toBe(200);
    expect(res.json.sso.connection).toBeNull();
    expect(res.json.sso.serviceProvider).toEqual({
      signInUrl: `http://app.test/api/auth/sso/${org}`,
      oidcRedirectUri: `http://app.test/api/auth/sso/${org}/oidc/callback`,
      samlEntityId: `http://app.test/api/auth/sso/${org}/saml/metadata`,
      samlMetadataUrl: `http://app.test/api/auth/sso/${org}/saml/metadata`,
      samlAcsUrl: `http://app.test/api/auth/sso/${org}/saml/acs`,
    });
  });

  it("lets owners and admins set an OIDC connection; the secret is sealed and never shown", async () => {
    const res = await put(ADMIN, OIDC);
    expect(res.status).toBe(200);
    expect(res.json.sso.connection).toMatchObject({
      protocol: "oidc",
      slug: "acme",
      issuer: "https://idp.example.com",
      clientId: "acme-platform",
      clientSecretSet: true,
      defaultRole: "member",
      groupsAttribute: "groups",
      enabled: true,
    });
    expect(res.text).not.toContain(OIDC.clientSecret);
    const [row] = await db()<{ oidc_client_secret_sealed: string }[]>`
      select oidc_client_secret_sealed from organisation_sso where organisation_id = ${org}`;
    expect(row!.oidc_client_secret_sealed).not.toContain(OIDC.clientSecret);
    const connection = await connectionOf(org);
    expect(connection?.protocol === "oidc" && connection.clientSecret).toBe(OIDC.clientSecret);
    // Left out, the secret is kept for the same client; a new client needs its own.
    const { clientSecret: _, ...withoutSecret } = OIDC;
    expect((await put(OWNER, { ...withoutSecret, defaultRole: "viewer" })).status).toBe(200);
    expect((await connectionOf(org))?.defaultRole).toBe("viewer");
    const other = await put(OWNER, { ...withoutSecret, clientId: "another-client" });
    expect(other.status).toBe(400);
    expect(other.json.error).toMatch(/clientSecret/);
    const audit = await db()<{ action: string; details: Record<string, unknown> }[]>`
      select action, details from audit_log where user_id = ${org} and action = 'sso.configured'
      order by id`;
    expect(audit.length).toBeGreaterThanOrEqual(2);
    expect(JSON.stringify(audit)).not.toContain(OIDC.clientSecret);
  });

  it("refuses other roles (403) and non-members (404)", async () => {
    expect((await get(MEMBER)).status).toBe(403);
    expect((await put(MEMBER, OIDC)).status).toBe(403);
    expect((await get(STRANGER)).status).toBe(404);
    expect((await put(STRANGER, OIDC)).status).toBe(404);
  });

  it("checks the body: never an owner mapping, a well-formed slug, an http(s) issuer", async () => {
    const owner = await put(OWNER, { ...OIDC, groupRoles: { bosses: "owner" } });
    expect(owner.status).toBe(400);
    expect((await put(OWNER, { ...OIDC, slug: "Not A Slug!" })).status).toBe(400);
    expect((await put(OWNER, { ...OIDC, issuer: "ftp://idp.example.com" })).status).toBe(400);
  });

  it("takes a SAML connection from the IdP's metadata XML, or from its three fields", async () => {
    const xml = idpMetadataXml("https://saml-idp.example.com", "https://saml-idp.example.com/sso");
    const res = await put(OWNER, { protocol: "saml", slug: "acme", metadataXml: xml });
    expect(res.status).toBe(200);
    expect(res.json.sso.connection).toMatchObject({
      protocol: "saml",
      idpEntityId: "https://saml-idp.example.com",
      ssoUrl: "https://saml-idp.example.com/sso",
      certificate: TEST_CERT_BASE64,
    });
    const fields = await put(OWNER, {
      protocol: "saml",
      slug: "acme",
      idpEntityId: "urn:idp",
      ssoUrl: "https://idp.example.com/saml",
      certificate: `-----BEGIN CERTIFICATE-----\n${TEST_CERT_BASE64}\n-----END CERTIFICATE-----`,
    });
    expect(fields.status).toBe(200);
    expect(fields.json.sso.connection.certificate).toBe(TEST_CERT_BASE64);
    const none = await put(OWNER, { protocol: "saml", slug: "acme", idpEntityId: "urn:idp" });
    expect(none.status).toBe(400);
    const bad = await put(OWNER, { protocol: "saml", slug: "acme", metadataXml: "<nope" });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatch(/metadataXml/);
  });

  it("keeps a slug to one organisation, and finds the enabled connection by it", async () => {
    const other = (await createOrganisation(OWNER, "Other")).organisation.id;
    const taken = await put(OWNER, { ...OIDC, slug: "acme" }, other);
    expect(taken.status).toBe(409);
    expect((await ssoConnectionFor({ slug: "ACME" }))?.organisationId).toBe(org);
    await put(OWNER, { ...OIDC, enabled: false });
    expect(await ssoConnectionFor({ slug: "acme" })).toBeUndefined();
  });

  it("removes the connection, audited; a second removal is 404", async () => {
    const res = await call(ssoRoute, path(org), {
      method: "DELETE",
      params: { id: org },
      headers: await as(OWNER),
    });
    expect(res.status).toBe(200);
    expect(await connectionOf(org)).toBeUndefined();
    const again = await call(ssoRoute, path(org), {
      method: "DELETE",
      params: { id: org },
      headers: await as(OWNER),
    });
    expect(again.status).toBe(404);
    const [audit] = await db()`select 1 from audit_log
      where user_id = ${org} and action = 'sso.removed'`;
    expect(audit).toBeDefined();
  });
});

describe("organisation SSO on the pages", () => {
  it("is set from the organisation page's form (no JavaScript), and shown to managers only", async () => {
    const saved = await page(
      organisationPage,
      `/organizations/${org}`,
      await as(OWNER),
      {
        intent: "sso",
        protocol: "oidc",
        slug: "acme-pages",
        enabled: "on",
        issuer: "https://idp.example.com",
        clientId: "acme-pages",
        clientSecret: "a-secret-from-the-form",
        groupsAttribute: "groups",
        groupRoles: "engineers = member\nbosses = admin",
        defaultRole: "viewer",
      },
      { id: org },
    );
    expect(saved.status).toBe(200);
    const c = await connectionOf(org);
    expect(c).toMatchObject({
      slug: "acme-pages",
      groupRoles: { engineers: "member", bosses: "admin" },
      defaultRole: "viewer",
    });
    const bad = await page(
      organisationPage,
      `/organizations/${org}`,
      await as(OWNER),
      { intent: "sso", protocol: "oidc", slug: "acme-pages", groupRoles: "x = owner" },
      { id: org },
    );
    expect(JSON.stringify(bad.body)).toMatch(/groupRoles|issuer/);
    const owner = (await page(
      organisationPage,
      `/organizations/${org}`,
      await as(OWNER),
      undefined,
      {
        id: org,
      },
    )) as { body: { sso: { connection: { slug: string } } | null } };
    expect(owner.body.sso?.connection.slug).toBe("acme-pages");
    expect(JSON.stringify(owner.body)).not.toContain("a-secret-from-the-form");
    const viewer = (await page(
      organisationPage,
      `/organizations/${org}`,
      await as(MEMBER),
      undefined,
      {
        id: org,
      },
    )) as { body: { sso: unknown } };
    expect(viewer.body.sso).toBeNull();
  });

  it("offers 'Sign in with SSO' on the sign-in page once a connection exists, and explains a refusal", async () => {
    await setSsoConnection(org, OWNER, {
      protocol: "oidc",
      slug: "acme-signin",
      enabled: true,
      issuer: "https://idp.example.com",
      clientId: "acme-signin",
      clientSecret: "another-secret",
      groupsAttribute: "groups",
      groupRoles: {},
      defaultRole: "member",
    });
    const signin = await signinLoader({
      request: new Request("http://app.test/signin?error=saml_replay"),
      params: {},
      context: {},
    });
    expect(signin.sso).toBe(true);
    expect(signin.error).toMatch(/already used/);
  });
});
