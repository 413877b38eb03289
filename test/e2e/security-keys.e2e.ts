import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, type RunningApp, startApp } from "./app.ts";

// Security keys on the settings page, with Chromium's virtual authenticator (CDP WebAuthn
// domain): add a key with JavaScript on (a real navigator.credentials.create and the server's
// attestation check), see it listed, remove it with a plain form post with JavaScript off.
// WebAuthn needs a domain as RP id (not an IP), so the pages are opened on localhost.
let app: RunningApp;
let browser: Browser;
let origin: string;
const userAgent =
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36";

beforeAll(async () => {
  app = await startApp();
  origin = app.url.replace("127.0.0.1", "localhost");
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await app?.stop();
});

describe("security keys", () => {
  it("adds a key with a (virtual) authenticator, lists it, removes it without JavaScript", async () => {
    const context = await browser.newContext({ userAgent });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    const cdp = await context.newCDPSession(page);
    await cdp.send("WebAuthn.enable");
    await cdp.send("WebAuthn.addVirtualAuthenticator", {
      options: {
        protocol: "ctap2",
        transport: "usb",
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    });

    const email = `keys-${Date.now()}@example.com`;
    const password = "a good long password";
    await page.goto(`${origin}/signup`);
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Create account" }).click();
    // Sign-up signs in (decision 0010, amended).
    await expect.poll(() => new URL(page.url()).pathname).toBe("/welcome");

    await page.goto(`${origin}/settings`);
    await page.getByLabel("Security key name").fill("Virtual key");
    const add = page.getByRole("button", { name: "Add security key" });
    await expect.poll(() => add.isEnabled()).toBe(true);
    await add.click();
    await expect.poll(() => page.getByText("Security key added.").isVisible()).toBe(true);
    await expect.poll(() => page.getByTestId("security-keys").textContent()).toMatch(/Virtual key/);
    expect(errors).toEqual([]);

    // Without JavaScript: the list shows, adding explains why it cannot, removing works.
    const cookies = await context.cookies();
    const noJs = await browser.newContext({ userAgent, javaScriptEnabled: false });
    await noJs.addCookies(cookies);
    const plain = await noJs.newPage();
    await plain.goto(`${origin}/settings`);
    await expect
      .poll(() => plain.getByText("Adding a security key needs JavaScript.").isVisible())
      .toBe(true);
    await plain.getByTestId("security-keys").getByRole("button", { name: "Remove" }).click();
    await expect.poll(() => plain.getByText("No security key yet.").isVisible()).toBe(true);
    await noJs.close();
    await context.close();
  });
});
