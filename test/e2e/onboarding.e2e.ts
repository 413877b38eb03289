import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeTelegram, startFakeTelegram } from "../agents/fake-telegram.ts";
import { launchBrowser, type RunningApp, startApp } from "./app.ts";

// A new person's first agent in a real browser, JavaScript on and off: sign up (signed in at
// once) → the guided steps (name, model with its price, a Telegram bot token checked on the
// spot against a local stand-in of the Bot API, create) → the agent's chat with a first message
// suggested. No worker runs: the agent stays "provisioning", which the chat page must survive.
let app: RunningApp;
let browser: Browser;
let telegram: FakeTelegram;
const userAgent =
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36";

beforeAll(async () => {
  telegram = await startFakeTelegram("7000001:onboarding-token");
  app = await startApp({
    // A fresh install: no payment processor, the self-hosted default plan (decision 0100).
    STRIPE_SECRET_KEY: "",
    DEFAULT_PLAN: "",
    TELEGRAM_API_URL: `http://127.0.0.1:${telegram.port}`,
    AGENT_PROVISION_WAIT_MS: "0",
  });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await app?.stop();
  telegram?.close();
});

const heading = (page: Page) => page.getByRole("heading", { level: 1 }).textContent();

describe.each([true, false])("onboarding with JavaScript %s", (javaScriptEnabled) => {
  it("sign up → name → model → checked Telegram token → create → the chat, a first message suggested", async () => {
    const context = await browser.newContext({ javaScriptEnabled, userAgent });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));

    await page.goto(`${app.url}/signup`);
    await page.getByLabel("Email").fill(`new-${javaScriptEnabled}-${Date.now()}@example.com`);
    await page.getByLabel("Password").fill("a good long password");
    await page.getByRole("button", { name: "Create account" }).click();
    await expect.poll(() => new URL(page.url()).pathname).toBe("/welcome");
    await expect.poll(() => heading(page)).toBe("Set up your agent");
    await expect
      .poll(() => page.locator('[aria-current="step"]').textContent())
      .toBe("1. Name your agent");

    // A blank name (it passes the browser's `required`) is refused where the name is typed.
    await page.getByLabel("What should your agent be called?").fill(" ");
    await page.getByRole("button", { name: "Next: pick a model" }).click();
    await expect.poll(() => page.getByRole("alert").first().textContent()).toBe("Name is required");
    await page.getByLabel("What should your agent be called?").fill("Ada");
    await page.getByRole("button", { name: "Next: pick a model" }).click();

    await expect
      .poll(() => page.locator('[aria-current="step"]').textContent())
      .toBe("2. Pick a model");
    // Every model says what it costs.
    await page.locator('[data-testid^="price-"]').first().waitFor();
    const prices = await page.locator('[data-testid^="price-"]').allTextContents();
    expect(prices.length).toBeGreaterThan(0);
    for (const p of prices) expect(p).toMatch(/per million tokens|default model/);
    await page.getByRole("radio").first().check();
    await page.getByRole("button", { name: "Next: connect a chat app" }).click();

    await expect
      .poll(() => page.locator('[aria-current="step"]').textContent())
      .toBe("3. Connect a chat app and create");
    await page.getByRole("radio", { name: "Telegram" }).check();
    await page.getByLabel("Bot token").fill("7000001:wrong-token");
    await page.getByRole("button", { name: "Check token" }).click();
    await expect
      .poll(() => page.getByRole("alert").first().textContent())
      .toMatch(/^Telegram refused this token/);
    await page.getByLabel("Bot token").fill(telegram.token);
    await page.getByRole("button", { name: "Check token" }).click();
    await expect
      .poll(() => page.getByRole("status").first().textContent())
      .toBe("Token works: the bot is @platform_test_bot.");
    await page.getByRole("button", { name: "Create my agent" }).click();

    await expect.poll(() => new URL(page.url()).pathname).toMatch(/^\/agents\/agt_\w+\/chat$/);
    await expect.poll(() => heading(page)).toBe("Chat with Ada");
    await expect
      .poll(() => page.getByLabel("Message").inputValue())
      .toMatch(/^Hi! Introduce yourself/);
    // No worker runs here: the agent is still provisioning, and the chat says so (not an error).
    await expect
      .poll(() => page.getByTestId("agent-starting").textContent())
      .toMatch(/^Your agent is starting \(0 of 5 steps done\)/);
    expect(telegram.calls.filter((c) => c === "getMe").length).toBeGreaterThanOrEqual(2);

    // Chat first; the rest in tabs, each its own page. The gateway is not up (no worker here):
    // the skills tab says so in the error style.
    const tabs = page.getByRole("navigation", { name: "Agent" });
    await expect.poll(() => tabs.locator('[aria-current="page"]').textContent()).toBe("Chat");
    await tabs.getByRole("link", { name: "Skills" }).click();
    await expect.poll(() => heading(page)).toBe("Skills of Ada");
    await expect.poll(() => tabs.locator('[aria-current="page"]').textContent()).toBe("Skills");
    await expect.poll(() => page.getByRole("alert").first().isVisible()).toBe(true);
    await tabs.getByRole("link", { name: "Channels & keys" }).click();
    await expect.poll(() => heading(page)).toBe("Channels and keys of Ada");
    await tabs.getByRole("link", { name: "Logs" }).click();
    await expect.poll(() => heading(page)).toBe("Logs of Ada");
    await tabs.getByRole("link", { name: "Settings" }).click();
    await expect.poll(() => heading(page)).toBe("Settings of Ada");
    await expect.poll(() => page.getByLabel("Name", { exact: true }).inputValue()).toBe("Ada");
    await page.getByLabel("Name", { exact: true }).fill(" ");
    await page.getByRole("button", { name: "Save", exact: true }).first().click();
    await expect
      .poll(() => page.locator("#settings-profile [role=alert]").first().textContent())
      .toBe("Name is required");
    await page.getByLabel("Name", { exact: true }).fill("Ada Lovelace");
    await page.getByLabel("Persona").fill("A patient tutor.");
    await page.getByRole("button", { name: "Save", exact: true }).first().click();
    await expect
      .poll(() => page.locator("#settings-profile [role=status]").first().textContent())
      .toMatch(/^Saved/);
    await expect.poll(() => heading(page)).toBe("Settings of Ada Lovelace");
    await tabs.getByRole("link", { name: "Status" }).click();
    await expect.poll(() => heading(page)).toBe("Ada Lovelace");
    // The steps the worker is at (none yet: no worker here), refreshed while it starts.
    await expect
      .poll(() => page.getByTestId("agent-progress").locator("li").allTextContents())
      .toEqual([
        "…Container createdin progress",
        "·Gateway healthy",
        "·Paired with the platform",
        "·Warmed up",
        "·Ready",
      ]);
    expect(errors).toEqual([]);
    await context.close();
  });
});
