import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, type RunningApp, startApp } from "./app.ts";

// Pricing, billing and files pages in a real browser, with JavaScript on and off. The server
// runs without Stripe configured (no fake reaches another process): self-hosted mode, where the
// pages say who gives plans instead of offering checkouts (decision 0100), and the add-ons
// without anything behind them are requests (decision 0101).
let app: RunningApp;
let browser: Browser;
const userAgent =
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36";

beforeAll(async () => {
  app = await startApp({
    STRIPE_SECRET_KEY: "",
    STRIPE_WEBHOOK_SECRET: "",
    DEFAULT_PLAN: "",
    OPERATOR_CONTACT: "ops@example.com",
  });
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
    // No payments here: the page says who gives plans, and offers no checkout.
    await expect
      .poll(() => page.getByTestId("self-hosted").textContent())
      .toMatch(/takes no payments.*ops@example\.com.*starts on the solo plan/);
    expect(await page.getByRole("link", { name: "Subscribe to Solo" }).count()).toBe(0);

    const email = `billing-${javaScriptEnabled}-${Date.now()}@example.com`;
    const password = "a good long password";
    await page.goto(`${app.url}/signup`);
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Create account" }).click();
    await expect.poll(() => new URL(page.url()).pathname).toBe("/welcome");

    await page.goto(`${app.url}/billing`);
    await expect.poll(() => page.getByTestId("current-plan").textContent()).toMatch(/Plan solo/);
    await expect
      .poll(() => page.getByTestId("self-hosted-plan").textContent())
      .toMatch(/Your plan is solo \(this server's plan for every account\): up to 1 agent thread/);
    await expect.poll(() => page.getByTestId("credit-balance").textContent()).toBe("0.00");
    expect(await page.getByRole("button", { name: /Subscribe to|Switch to/ }).count()).toBe(0);
    expect(await page.getByRole("button", { name: /^Buy pack/ }).count()).toBe(0);
    // Each add-on says what it gives; Slack is asked for, not bought.
    await expect
      .poll(() => page.locator('[data-addon="audit-logs"]').textContent())
      .toMatch(/kept 365 days instead of 90/);
    await page.getByRole("button", { name: "Request Slack Integration" }).click();
    await expect.poll(() => page.getByRole("status").first().textContent()).toMatch(/Request sent/);
    await expect
      .poll(() => page.locator('[data-addon="slack"]').textContent())
      .toMatch(/Requested: an operator contacts you/);

    await page.goto(`${app.url}/files`);
    await expect.poll(() => page.getByTestId("storage").textContent()).toBe("0 GB used of 5 GB");
    expect(errors).toEqual([]);
    await context.close();
  });
});
