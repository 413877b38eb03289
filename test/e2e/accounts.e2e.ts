import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, type RunningApp, startApp } from "./app.ts";

// The account journey in a real browser against the built server, with JavaScript on (conform
// validates on the client, Remix submits with fetch) and off (plain HTML forms).
let app: RunningApp;
let browser: Browser;
// Headless Chromium says "HeadlessChrome", which the bot detection rightly refuses (403): the
// tests present themselves as the desktop browser a person would use.
const userAgent =
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36";

beforeAll(async () => {
  // A fresh install: no payment processor, the self-hosted default plan (decision 0100).
  app = await startApp({ STRIPE_SECRET_KEY: "", DEFAULT_PLAN: "" });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await app?.stop();
});

async function heading(page: Page) {
  return page.getByRole("heading", { level: 1 }).textContent();
}

describe.each([true, false])("accounts with JavaScript %s", (javaScriptEnabled) => {
  it("sign up (signed in, on the agents page) → sign out → sign in → create an API key → GET /api/user with it → sign out", async () => {
    const context = await browser.newContext({ javaScriptEnabled, userAgent });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    const email = `e2e-${javaScriptEnabled}-${Date.now()}@example.com`;
    const password = "a good long password";

    // Sign up.
    await page.goto(`${app.url}/signup`);
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByLabel("Name (optional)").fill("Eve Tester");
    await page.getByRole("button", { name: "Create account" }).click();
    // Signed in at once, on the guided first agent, and this server's default plan hosts one.
    await expect.poll(() => new URL(page.url()).pathname).toBe("/welcome");
    await expect.poll(() => heading(page)).toBe("Set up your agent");
    await expect.poll(() => page.getByRole("link", { name: "Eve Tester" }).isVisible()).toBe(true);
    await page.goto(`${app.url}/agents`);
    await expect
      .poll(() => page.getByRole("button", { name: "Provision agent" }).isVisible())
      .toBe(true);
    expect(await page.getByTestId("no-plan").count()).toBe(0);
    await page.getByRole("button", { name: "Sign out" }).click();
    await expect.poll(() => page.getByRole("link", { name: "Sign in" }).isVisible()).toBe(true);
    await page.goto(`${app.url}/signin`);

    // A wrong password is refused with the one message.
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill("not the password");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await expect
      .poll(() => page.getByRole("alert").first().textContent())
      .toBe("Invalid email or password");

    // Sign in.
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await expect.poll(() => new URL(page.url()).pathname).toBe("/settings");
    await expect.poll(() => heading(page)).toBe("Settings");
    await expect.poll(() => page.getByRole("link", { name: "Eve Tester" }).isVisible()).toBe(true);

    // Create an API key; it is shown once.
    await page.getByRole("link", { name: "API keys" }).click();
    await expect.poll(() => heading(page)).toBe("API keys");
    await page.getByLabel("Key name").fill("browser test");
    await page.getByRole("button", { name: "Create key" }).click();
    const shown = page.getByTestId("new-api-key");
    await expect.poll(() => shown.textContent()).toMatch(/^sk_[A-Za-z0-9_-]{43}$/);
    const key = (await shown.textContent())!;
    await expect.poll(() => page.getByRole("button", { name: "Copy" }).isVisible()).toBe(true);
    await expect
      .poll(() => page.getByRole("cell", { name: "browser test", exact: true }).isVisible())
      .toBe(true);

    // The key authenticates a program.
    const res = await fetch(`${app.url}/api/user`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ success: true, user: { email, name: "Eve Tester" } });

    // After a reload the key is no longer displayed; only its preview.
    await page.goto(`${app.url}/keys`);
    // (the preview first: it proves the page has rendered before the key's absence is read)
    await expect
      .poll(() => page.getByText(`${key.slice(0, 7)}…${key.slice(-4)}`).isVisible())
      .toBe(true);
    expect(await page.getByTestId("new-api-key").count()).toBe(0);

    // Sign out: the browser's session stops working.
    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === "__session");
    expect(session?.httpOnly).toBe(true);
    expect(session?.sameSite).toBe("Lax");
    await page.getByRole("button", { name: "Sign out" }).click();
    await expect.poll(() => page.getByRole("link", { name: "Sign in" }).isVisible()).toBe(true);
    const after = await fetch(`${app.url}/api/user`, {
      headers: { cookie: `__session=${session!.value}` },
    });
    expect(after.status).toBe(401);
    await page.goto(`${app.url}/keys`);
    expect(new URL(page.url()).pathname).toBe("/signin");

    expect(errors).toEqual([]);
    await context.close();
  });
});

describe("account pages", () => {
  it("refuse a headless browser's sign-up as a bot (403)", async () => {
    const page = await browser.newPage(); // default HeadlessChrome User-Agent
    await page.goto(`${app.url}/signup`);
    await page.getByLabel("Email").fill(`bot-${Date.now()}@example.com`);
    await page.getByLabel("Password").fill("a good long password");
    await page.getByRole("button", { name: "Create account" }).click();
    await expect
      .poll(() => page.getByText("Request blocked by bot detection").isVisible())
      .toBe(true);
    await page.close();
  });

  it("show validation errors and both OAuth buttons without JavaScript", async () => {
    const context = await browser.newContext({ javaScriptEnabled: false, userAgent });
    const page = await context.newPage();
    await page.goto(`${app.url}/signup`);
    await page.getByLabel("Email").fill("not-an-email");
    await page.getByLabel("Password").fill("short");
    await page.getByRole("button", { name: "Create account" }).click();
    await expect.poll(() => page.getByText("must be a valid email address").isVisible()).toBe(true);
    await expect.poll(() => page.getByText("must be at least 8 characters").isVisible()).toBe(true);
    await page.goto(`${app.url}/signin`);
    await expect.poll(() => page.getByText("Continue with Google").isVisible()).toBe(true);
    await expect.poll(() => page.getByText("Continue with GitHub").isVisible()).toBe(true);
    await page.goto(`${app.url}/forgot-password`);
    await page.getByLabel("Email").fill("nobody@example.com");
    await page.getByRole("button", { name: "Send reset link" }).click();
    await expect
      .poll(() => page.getByRole("status").textContent())
      .toMatch(/If an account exists, a reset link has been sent/);
    await context.close();
  });
});
