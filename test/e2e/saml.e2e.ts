import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import { createOrganisation } from "../../app/server/organisations/organisations.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { setSsoConnection } from "../../app/server/sso/connections.server.ts";
import { startTestSamlIdp, type TestSamlIdp } from "../helpers/saml-idp.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";
import { idpMetadataXml, TEST_IDP_CERT, TEST_IDP_KEY } from "../sso/saml-fixtures.ts";
import { launchBrowser, type RunningApp, startApp } from "./app.ts";
import { violations } from "./axe.ts";

// An organisation's SAML sign-in as its people meet it (issue 49, decision 0211): the sign-in
// page's "Sign in with SSO" with the organisation's SSO name, our AuthnRequest to a real SAML
// IdP (samlify) on loopback, its signed answer POSTed back by the browser (the IdP's form sends
// itself with JavaScript, or with its Continue button without), and the organisation's page,
// signed in. A tampered answer is a sign-in page that says why. JavaScript on and off.

let app: RunningApp;
let browser: Browser;
let idp: TestSamlIdp;
let org: string;
const OWNER = "usr_saml_e2e_owner";
const userAgent =
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36";

beforeAll(async () => {
  app = await startApp({ STRIPE_SECRET_KEY: "", DEFAULT_PLAN: "" });
  idp = await startTestSamlIdp({ privateKey: TEST_IDP_KEY, certificate: TEST_IDP_CERT });
  await ensureUser(OWNER);
  org = (await createOrganisation(OWNER, "Umbrella")).organisation.id;
  await assignPlan(org, "network", "usr_saml_e2e_operator");
  await setSsoConnection(org, OWNER, {
    protocol: "saml",
    slug: "umbrella",
    enabled: true,
    metadataXml: idpMetadataXml(idp.entityId, idp.ssoUrl),
    groupsAttribute: "groups",
    groupRoles: { "umbrella-staff": "member" },
    defaultRole: "viewer",
  });
  // Accounts are made by SSO only at the organisation's verified domains.
  await db()`insert into organisation_domains (id, organisation_id, domain, token, verified_at)
    values ('dom_saml_e2e_umbrella', ${org}, 'umbrella.test', 'test-token', now())`;
  // The IdP is given our metadata from its URL, as an admin would.
  idp.trust(await (await fetch(`${app.url}/api/auth/sso/${org}/saml/metadata`)).text());
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await app?.stop();
  await idp?.close();
});

/** From our sign-in page to the IdP and back (its form sends itself, or is sent by hand). */
async function signInWithSso(page: Page, javaScriptEnabled: boolean) {
  await page.goto(`${app.url}/signin`);
  await page.getByLabel("Your work email or your organisation's SSO name").fill("umbrella");
  await page.getByRole("button", { name: "Sign in with SSO" }).click();
  if (!javaScriptEnabled) {
    await page.waitForURL((url) => url.href.startsWith(idp.ssoUrl));
    await page.getByRole("button", { name: "Continue" }).click();
  }
  await page.waitForURL((url) => url.origin === app.url && !url.pathname.startsWith("/api/"));
}

describe.each([true, false])("SAML sign-in in Chromium, JavaScript %s", (javaScriptEnabled) => {
  it("signs a new person in through the organisation's IdP, a member with the mapped role", async () => {
    const context = await browser.newContext({ javaScriptEnabled, userAgent });
    const page = await context.newPage();
    const email = `saml-e2e-${javaScriptEnabled}-${Date.now()}@umbrella.test`;
    idp.user = {
      nameId: email,
      email,
      name: `Alice ${javaScriptEnabled}`,
      groups: ["umbrella-staff"],
    };
    await signInWithSso(page, javaScriptEnabled);
    await expect.poll(() => new URL(page.url()).pathname).toBe(`/organizations/${org}`);
    await expect.poll(() => page.getByRole("heading", { name: "Umbrella" }).isVisible()).toBe(true);
    const [member] = await db()<{ role: string }[]>`
      select m.role from organisation_members m join users u on u.id = m.user_id
      where m.organisation_id = ${org} and u.email = ${email}`;
    expect(member?.role).toBe("member");
    await context.close();
  });

  it("refuses a tampered answer with a page that says why", async () => {
    const context = await browser.newContext({ javaScriptEnabled, userAgent });
    const page = await context.newPage();
    const email = `saml-e2e-t-${javaScriptEnabled}-${Date.now()}@umbrella.test`;
    idp.user = { nameId: email, email, groups: ["umbrella-staff"] };
    idp.tamper = (xml) => xml.replaceAll(email, "boss@umbrella.test");
    try {
      await signInWithSso(page, javaScriptEnabled);
    } finally {
      idp.tamper = undefined;
    }
    await expect.poll(() => new URL(page.url()).search).toBe("?error=saml_signature");
    await expect
      .poll(() => page.getByText("was not signed by its identity provider").isVisible())
      .toBe(true);
    await context.close();
  });
});

describe("SSO pages", () => {
  it("the sign-in page's SSO form and the organisation page's SSO section pass axe's WCAG A/AA rules", async () => {
    const context = await browser.newContext({ userAgent });
    const page = await context.newPage();
    await page.goto(`${app.url}/signin`);
    await expect
      .poll(() => page.getByLabel("Your work email or your organisation's SSO name").isVisible())
      .toBe(true);
    expect(await violations(page)).toEqual([]);
    const session = (await sessionCookieFor(OWNER)).split("=");
    await context.addCookies([
      { name: session[0]!, value: session.slice(1).join("="), url: app.url },
    ]);
    await page.goto(`${app.url}/organizations/${org}`);
    await expect
      .poll(() => page.getByText(`${app.url}/api/auth/sso/${org}/saml/acs`).isVisible())
      .toBe(true);
    expect(await violations(page)).toEqual([]);
    await context.close();
  });
});
