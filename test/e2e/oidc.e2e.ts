import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { db } from "../../app/server/platform/db.server.ts";
import { resign, startTestIdp, type TestIdp } from "../helpers/oidc-idp.ts";
import { launchBrowser, type RunningApp, startApp } from "./app.ts";

// The install-wide OpenID Connect sign-in as a person meets it (issue 49, decision 0205): the
// operator set the OIDC variables; the sign-in page's button leads to the provider (a real
// oidc-provider on loopback), its login and consent forms, and back, signed in. A refusal is a
// sign-in page that says why. JavaScript on and off (the button is a plain link).
let app: RunningApp;
let browser: Browser;
let idp: TestIdp;
const userAgent =
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36";

beforeAll(async () => {
  idp = await startTestIdp(() => `${app.url}/api/auth/oidc/callback`);
  app = await startApp({
    STRIPE_SECRET_KEY: "",
    DEFAULT_PLAN: "",
    OIDC_ISSUER: idp.issuer,
    OIDC_CLIENT_ID: idp.clientId,
    OIDC_CLIENT_SECRET: idp.clientSecret,
    OIDC_NAME: "Acme SSO",
    OIDC_SCOPES: "openid email profile groups",
  });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await app?.stop();
  await idp?.close();
});

let logins = 0;

/** From our sign-in page through the provider's forms as a fresh account; where it ends. */
async function signInThroughProvider(page: Page, account: Record<string, unknown>) {
  const login = `e2e-person-${++logins}`;
  idp.accounts.set(login, account);
  await page.goto(`${app.url}/signin`);
  await page.getByRole("link", { name: "Sign in with Acme SSO" }).click();
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill("any password");
  await page.getByRole("button", { name: "Sign-in" }).click();
  await page.getByRole("button", { name: "Continue" }).click();
  await page.waitForURL((url) => url.origin === app.url);
  return login;
}

describe.each([true, false])("OIDC sign-in in Chromium, JavaScript %s", (javaScriptEnabled) => {
  it("signs a new person in with an account made from the provider's verified email", async () => {
    const context = await browser.newContext({ javaScriptEnabled, userAgent });
    const page = await context.newPage();
    const email = `oidc-e2e-${javaScriptEnabled}-${Date.now()}@example.com`;
    await signInThroughProvider(page, {
      email,
      email_verified: true,
      name: `Grace ${javaScriptEnabled}`,
      groups: ["engineering"],
    });
    await expect.poll(() => new URL(page.url()).pathname).toBe("/settings");
    await expect
      .poll(() => page.getByRole("link", { name: `Grace ${javaScriptEnabled}` }).isVisible())
      .toBe(true);
    const [link] = await db()`
      select a.groups from oauth_accounts a join users u on u.id = a.user_id
      where a.provider = 'oidc' and lower(u.email) = lower(${email})`;
    expect(link?.groups).toEqual(["engineering"]);
    await context.close();
  });

  it("refuses a tampered ID token and an unverified email with a page that says why", async () => {
    const context = await browser.newContext({ javaScriptEnabled, userAgent });
    const page = await context.newPage();
    idp.tamper = resign(idp, (c) => ({ ...c, nonce: "another attempt" }));
    try {
      await signInThroughProvider(page, { email: "t@example.com", email_verified: true });
    } finally {
      idp.tamper = undefined;
    }
    await expect.poll(() => new URL(page.url()).search).toBe("?error=oidc_token");
    await expect.poll(() => page.getByText("did not pass our checks").isVisible()).toBe(true);

    // A fresh browser: the provider would otherwise remember the first person's session.
    const other = await browser.newContext({ javaScriptEnabled, userAgent });
    const page2 = await other.newPage();
    await signInThroughProvider(page2, { email: "u@example.com", email_verified: false });
    await expect.poll(() => new URL(page2.url()).search).toBe("?error=oidc_unverified");
    await expect
      .poll(() => page2.getByText("has not verified an email address").isVisible())
      .toBe(true);
    await context.close();
    await other.close();
  });
});
