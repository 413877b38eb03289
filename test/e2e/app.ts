import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type Browser, type BrowserContext, chromium } from "playwright-core";
import { afterEach } from "vitest";
import { freePort } from "../../app/server/platform/embedded-postgres.server.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export interface RunningApp {
  url: string;
  stop(): Promise<void>;
}

/** Starts the real web process (server.ts) on a free port against this file's database. */
export async function startApp(extraEnv: Record<string, string> = {}): Promise<RunningApp> {
  if (!existsSync(path.join(root, "build/index.js"))) {
    throw new Error("build/index.js is missing: run `npm run build` before the e2e tests");
  }
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [path.join(root, "server.ts")], {
    cwd: root,
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warn", ...extraEnv },
    stdio: ["ignore", "inherit", "inherit"],
  });
  // APP_URL's default (http://localhost:PORT): pages on 127.0.0.1 are redirected there.
  const url = `http://localhost:${port}`;
  const exited = new Promise<never>((_, reject) =>
    child.once("exit", (code) => reject(new Error(`server.ts exited with ${code}`))),
  );
  const ready = (async () => {
    for (;;) {
      const ok = await fetch(`${url}/api/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  await Promise.race([ready, exited]);
  return {
    url,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

// Every page any e2e test opens is watched for Content-Security-Policy violations: Chromium's
// console messages ("Refused to …", or "… violates the following Content Security Policy
// directive …" in newer versions; reported with JavaScript off too) and, where scripts run, the
// page's securitypolicyviolation events. Any of them fails the test that was running.
const cspViolations: string[] = [];
const CSP_MESSAGE = /Refused to |violates the following Content Security Policy|CSP violation/;
const watched = new WeakSet<BrowserContext>();

/** The violations seen since the last test ended (and forgets them). */
export const takeCspViolations = (): string[] => cspViolations.splice(0);

afterEach(() => {
  const seen = takeCspViolations();
  if (seen.length) {
    throw new Error(`Content-Security-Policy violations:\n${[...new Set(seen)].join("\n")}`);
  }
});

async function watchForCspViolations(context: BrowserContext): Promise<void> {
  // browser.newPage() goes through browser.newContext(): watch each context once.
  if (watched.has(context)) return;
  watched.add(context);
  context.on("console", (message) => {
    const text = message.text();
    if (CSP_MESSAGE.test(text)) cspViolations.push(`${message.page()?.url()}: ${text}`);
  });
  await context.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) => {
      console.error(
        `CSP violation: ${e.effectiveDirective} blocked ${e.blockedURI || "inline"} (${e.sourceFile}:${e.lineNumber})`,
      );
    });
  });
}

/** Debian's Chromium, headless, with the flags this offline machine needs. */
export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium not found at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`,
    );
  }
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-dev-shm-usage",
    ],
  });
  // Both ways a test opens pages get the watcher.
  const newContext = browser.newContext.bind(browser);
  browser.newContext = async (options) => {
    const context = await newContext(options);
    await watchForCspViolations(context);
    return context;
  };
  const newPage = browser.newPage.bind(browser);
  browser.newPage = async (options) => {
    const page = await newPage(options);
    await watchForCspViolations(page.context());
    return page;
  };
  return browser;
}
