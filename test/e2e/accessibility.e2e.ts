import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, type RunningApp, startApp } from "./app.ts";
import { violations } from "./axe.ts";

// An accessibility check of the main pages with axe-core (WCAG 2.x A and AA rules): sign-up,
// the onboarding steps, the agents list and the agent's tabs. axe is evaluated in the page
// through the browser's protocol (not a <script> tag, which the pages' CSP rightly refuses).
const userAgent =
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36";
let app: RunningApp;
let browser: Browser;

beforeAll(async () => {
  app = await startApp({ STRIPE_SECRET_KEY: "", DEFAULT_PLAN: "", AGENT_PROVISION_WAIT_MS: "0" });
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await app?.stop();
});

describe("accessibility of the main pages", () => {
  it("has no WCAG A/AA violations from sign-up to the agent's tabs", async () => {
    const context = await browser.newContext({ userAgent });
    const page = await context.newPage();
    const seen: Record<string, string[]> = {};
    const check = async (name: string) => {
      await page.waitForLoadState("load");
      seen[name] = await violations(page);
    };

    await page.goto(`${app.url}/signup`);
    await check("sign-up");
    await page.getByLabel("Email").fill(`a11y-${Date.now()}@example.com`);
    await page.getByLabel("Password").fill("a good long password");
    await page.getByRole("button", { name: "Create account" }).click();
    await expect.poll(() => new URL(page.url()).pathname).toBe("/welcome");
    await check("onboarding: name");
    await page.getByLabel("What should your agent be called?").fill("Ada");
    await page.getByRole("button", { name: "Next: pick a model" }).click();
    await expect
      .poll(() => page.locator('[aria-current="step"]').textContent())
      .toBe("2. Pick a model");
    await check("onboarding: model");
    await page.getByRole("button", { name: "Next: connect a chat app" }).click();
    await expect
      .poll(() => page.getByRole("button", { name: "Create my agent" }).isVisible())
      .toBe(true);
    await check("onboarding: chat app");
    await page.getByRole("button", { name: "Create my agent" }).click();
    await expect.poll(() => new URL(page.url()).pathname).toMatch(/\/chat$/);
    await check("chat");
    const base = new URL(page.url()).pathname.replace(/\/chat$/, "");
    for (const [name, path] of [
      ["status", base],
      ["settings", `${base}/settings`],
      ["skills", `${base}/skills`],
      ["channels", `${base}/channels`],
      ["logs", `${base}/logs`],
      ["agents list", "/agents"],
    ] as const) {
      await page.goto(`${app.url}${path}`);
      await check(name);
    }
    await context.close();
    expect(Object.fromEntries(Object.entries(seen).filter(([, v]) => v.length > 0))).toEqual({});
  }, 120_000);
});
