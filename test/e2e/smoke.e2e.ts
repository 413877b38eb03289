import { mkdir } from "node:fs/promises";
import { Validator } from "@seriousme/openapi-schema-validator";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, type RunningApp, startApp } from "./app.ts";

let app: RunningApp;
let browser: Browser;

beforeAll(async () => {
  app = await startApp();
  browser = await launchBrowser();
  await mkdir("test-results", { recursive: true });
});

afterAll(async () => {
  await browser?.close();
  await app?.stop();
});

describe("the landing page", () => {
  it.each([true, false])("renders with JavaScript %s", async (javaScriptEnabled) => {
    const context = await browser.newContext({ javaScriptEnabled });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    const response = await page.goto(app.url);
    expect(response?.status()).toBe(200);
    await expect
      .poll(() => page.getByRole("heading", { level: 1 }).textContent())
      .toBe("Host AI agents that work for you");
    await expect.poll(() => page.getByRole("navigation", { name: "Main" }).isVisible()).toBe(true);
    // The stylesheet is served and applied (once it has loaded).
    await expect
      .poll(() => page.evaluate(() => getComputedStyle(document.body.firstElementChild!).display))
      .toBe("flex");
    await page.screenshot({
      path: `test-results/landing-js-${javaScriptEnabled}.png`,
      fullPage: true,
    });
    expect(errors).toEqual([]);
    await context.close();
  });

  it("shows the not-found page for an unknown path", async () => {
    const page = await browser.newPage();
    const response = await page.goto(`${app.url}/no/such/page`);
    expect(response?.status()).toBe(404);
    await expect
      .poll(() => page.getByRole("heading", { level: 1 }).textContent())
      .toBe("Page not found");
    await page.close();
  });
});

describe("the API over the real server", () => {
  it("answers an unknown path with a JSON 404", async () => {
    const res = await fetch(`${app.url}/api/nope`, { method: "POST" });
    expect(res.status).toBe(404);
    expect(res.headers.get("content-type")).toContain("application/json");
    expect(await res.json()).toEqual({ error: "No API endpoint at /api/nope" });
  });

  it("answers a wrong method with a JSON 405", async () => {
    const res = await fetch(`${app.url}/api/health`, { method: "DELETE" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET");
    expect(await res.json()).toEqual({ error: "Method DELETE not allowed" });
  });

  it("answers health with 200", async () => {
    const res = await fetch(`${app.url}/api/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "ok", database: "ok", queue: "ok" });
  });

  it("serves a valid OpenAPI 3.1 document listing the routes", async () => {
    const res = await fetch(`${app.url}/api/openapi.json`);
    expect(res.status).toBe(200);
    const doc = await res.json();
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(["/api/health", "/api/openapi.json"]),
    );
  });
});
