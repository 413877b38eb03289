import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, type RunningApp, startApp } from "./app.ts";

// Pricing, billing and files pages in a real browser, with JavaScript on and off. The server
// runs without Stripe configured (no fake reaches another process): buying answers with the
// page's own "not configured" error instead of crashing.
let app: RunningApp;
let browser: Browser;
const userAgent =
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36";

beforeAll(async () => {
  app = await startApp({ STRIPE_SECRET_KEY: "", STRIPE_WEBHOOK_SECRET: "" });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await app?.stop();
});

describe.each([true, false])("billing pages with JavaScript %s", (javaScriptEnabled) => {
  it("pricing is public; billing and files show plan, credits and storage", async () => {
    const context = await browser.newContext({ javaScriptEnabled, userAgent });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));

    await page.goto(`${app.url}/pricing`);
    await expect.poll(() => page.getByRole("heading", { level: 1 }).textContent()).toBe("Pricing");
    for (const text of [
      // (checked one by one so a failure names its text)

      "£29",
      "£69",
      "£149",
      "£499",
      "Audit Logs",
      "Full Enterprise Suite — £4,999/mo",
    ]) {
      await expect
        .poll(() => page.getByText(text, { exact: false }).first().isVisible())
        .toBe(true);
    }
    // Signed out, a plan link goes through the checkout endpoint to sign-in and back.
    await page.getByRole("link", { name: "Subscribe to Solo" }).click();
    await expect.poll(() => new URL(page.url()).pathname).toBe("/signin");
    expect(new URL(page.url()).searchParams.get("redirectTo")).toBe("/api/pay/checkout?plan=solo");

    const email = `billing-${javaScriptEnabled}-${Date.now()}@example.com`;
    const password = "a good long password";
    await page.goto(`${app.url}/signup`);
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Create account" }).click();
    await expect.poll(() => new URL(page.url()).pathname).toBe("/signin");
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await expect.poll(() => new URL(page.url()).pathname).toBe("/settings");

    await page.goto(`${app.url}/billing`);
    await expect.poll(() => page.getByTestId("current-plan").textContent()).toMatch(/Plan free/);
    await expect.poll(() => page.getByTestId("credit-balance").textContent()).toBe("0.00");
    await page.getByRole("button", { name: "Subscribe to Solo" }).click();
    await expect
      .poll(() => page.getByRole("alert").first().textContent())
      .toMatch(/Payments are not configured/);

    await page.goto(`${app.url}/files`);
    await expect.poll(() => page.getByTestId("storage").textContent()).toBe("0 GB used of 5 GB");
    expect(errors).toEqual([]);
    await context.close();
  });
});
