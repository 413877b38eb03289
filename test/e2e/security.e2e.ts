import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApiKey } from "../../app/server/accounts/api-keys.server.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import { launchBrowser, type RunningApp, startApp, takeCspViolations } from "./app.ts";

// The security headers of pages and API answers, and cross-site form posts, over the real
// server (docs/decisions/0097-security-headers.md).

let app: RunningApp;
let browser: Browser;
beforeAll(async () => {
  app = await startApp();
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await app?.stop();
});

const EVIL = "https://evil.example";

function expectCommonHeaders(res: Response) {
  expect(res.headers.get("x-content-type-options")).toBe("nosniff");
  expect(res.headers.get("referrer-policy")).toBe("strict-origin-when-cross-origin");
  expect(res.headers.get("x-frame-options")).toBe("DENY");
  expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
  // APP_URL is http here: no HSTS (tested with an https APP_URL below).
  expect(res.headers.get("strict-transport-security")).toBeNull();
}

describe("security headers", () => {
  it("a page gets a nonce-based CSP that its own inline scripts carry", async () => {
    const res = await fetch(`${app.url}/signin`);
    expect(res.status).toBe(200);
    expectCommonHeaders(res);
    const csp = res.headers.get("content-security-policy")!;
    const nonce = /script-src 'self' 'nonce-([A-Za-z0-9+/=]+)'/.exec(csp)?.[1];
    expect(nonce).toBeDefined();
    expect(csp).toContain("style-src 'self';");
    expect(csp).toContain("object-src 'none'");
    expect(csp).toContain("base-uri 'none'");
    expect(csp).not.toContain("unsafe-inline");
    const html = await res.text();
    // Every inline script of the page carries this answer's nonce.
    const inline = [...html.matchAll(/<script(?![^>]*\ssrc=)([^>]*)>/g)].map((m) => m[1]);
    expect(inline.length).toBeGreaterThan(0);
    for (const attrs of inline) expect(attrs).toContain(`nonce="${nonce}"`);
    // A fresh nonce per answer.
    const again = (await fetch(`${app.url}/signin`)).headers.get("content-security-policy");
    expect(again).not.toBe(csp);
  });

  it("an API answer gets the constant headers with a CSP that loads nothing", async () => {
    for (const path of ["/api/health", "/api/nope"]) {
      const res = await fetch(`${app.url}${path}`);
      expectCommonHeaders(res);
      expect(res.headers.get("content-security-policy")).toBe(
        "default-src 'none'; frame-ancestors 'none'; base-uri 'none'",
      );
    }
  });

  it("static files and redirects carry them too", async () => {
    const page = await (await fetch(`${app.url}/signin`)).text();
    const css = /href="(\/build\/[^"]+\.css)"/.exec(page)?.[1];
    expect(css).toBeDefined();
    expectCommonHeaders(await fetch(`${app.url}${css}`));
    const redirect = await fetch(`${app.url}/settings`, { redirect: "manual" });
    expect(redirect.status).toBe(302);
    expectCommonHeaders(redirect);
  });

  it("adds HSTS when APP_URL is https", async () => {
    const https = await startApp({ APP_URL: "https://app.example.test" });
    try {
      for (const path of ["/api/health", "/signin"]) {
        const res = await fetch(`${https.url}${path}`);
        expect(res.headers.get("strict-transport-security")).toBe("max-age=31536000");
      }
    } finally {
      await https.stop();
    }
  });
});

describe("cross-site requests", () => {
  const form = { "content-type": "application/x-www-form-urlencoded" };

  it("a form posted to a page from another site gets a 403 page that says why", async () => {
    const res = await fetch(`${app.url}/signin`, {
      method: "POST",
      headers: { ...form, origin: EVIL },
      body: "email=a%40example.com&password=whatever-it-is",
      redirect: "manual",
    });
    expect(res.status).toBe(403);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expectCommonHeaders(res);
    const html = await res.text();
    expect(html).toContain("<h1");
    expect(html).toContain("Request refused");
    expect(html).toContain("sent from evil.example, not from this site");
    // Sec-Fetch-Site alone (no Origin) says the same.
    const bySite = await fetch(`${app.url}/signout`, {
      method: "POST",
      headers: { ...form, "sec-fetch-site": "cross-site" },
      body: "",
      redirect: "manual",
    });
    expect(bySite.status).toBe(403);
  });

  it("a same-site form post still reaches the page's action", async () => {
    const res = await fetch(`${app.url}/signin`, {
      method: "POST",
      headers: { ...form, origin: app.url },
      body: "email=nobody%40example.com&password=whatever-it-is",
      redirect: "manual",
    });
    // The action ran: wrong credentials, answered by the form.
    expect(res.status).toBe(401);
    expect(await res.text()).toContain("Invalid email or password");
  });

  it("the API refuses cookie calls from another site with 403 {error}; API keys are unaffected", async () => {
    const userId = "usr_securitye2e000001";
    const cookie = await sessionCookieFor(userId);
    const { key } = await createApiKey(userId, "e2e");
    const patch = (headers: Record<string, string>) =>
      fetch(`${app.url}/api/settings`, {
        method: "PATCH",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ name: "Renamed" }),
      });
    const evil = await patch({ cookie, origin: EVIL });
    expect(evil.status).toBe(403);
    expect(await evil.json()).toEqual({ error: "Cross-site request refused" });
    expectCommonHeaders(evil);
    expect((await patch({ authorization: `Bearer ${key}` })).status).toBe(200);
    expect((await patch({ cookie, origin: app.url })).status).toBe(200);
  });

  it("in the browser: a form on another site that posts here lands on the 403 page", async () => {
    const page = await browser.newPage();
    // The attacker's page, served by the test at another origin.
    await page.route(`${EVIL}/**`, (route) =>
      route.fulfill({
        contentType: "text/html",
        body: `<form method="post" action="${app.url}/signout"><button>Win a prize</button></form>`,
      }),
    );
    await page.goto(`${EVIL}/`);
    await page.getByRole("button", { name: "Win a prize" }).click();
    await expect
      .poll(() => page.getByRole("heading", { level: 1 }).textContent())
      .toBe("Request refused");
    // The refusal page is styled by the app's stylesheet, within its own CSP (once it has
    // loaded: on a loaded machine the heading is there before the stylesheet applies).
    await expect
      .poll(() => page.evaluate(() => getComputedStyle(document.querySelector("main")!).marginLeft))
      .not.toBe("0px");
    await page.close();
  });
});

describe("the CSP watcher of the e2e pages", () => {
  it("notices a violation", async () => {
    const page = await browser.newPage();
    await page.goto(`${app.url}/signin`);
    await page.evaluate(() => {
      const script = document.createElement("script");
      script.textContent = "window.injected = true";
      document.body.append(script);
    });
    // Both channels report it: Chromium's console message and the page's event.
    const seen: string[] = [];
    await expect
      .poll(() => {
        seen.push(...takeCspViolations());
        return seen.join("\n");
      })
      .toMatch(
        /inline script[\s\S]*CSP violation: script-src-elem|CSP violation: script-src-elem[\s\S]*inline script/,
      );
    expect(await page.evaluate(() => (window as { injected?: boolean }).injected)).toBeUndefined();
    await page.close();
  });
});
