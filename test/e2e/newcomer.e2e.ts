import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../app/server/platform/embedded-postgres.server.ts";
import { processRuntime } from "../../worker/runtime/index.ts";
import { installOpenclaw, PINNED_OPENCLAW, repo } from "../../worker/runtime/openclaw-install.ts";
import { gatewayBuildFinished } from "../setup/gateway-build.ts";
import { launchBrowser } from "./app.ts";

// Issue 18's "done when" and issue 25's whole flow, as a newcomer meets them: the platform
// started the way `npm start` starts it (start.ts: build check, the embedded database in a fresh
// data folder, web and worker), no payment processor, no Docker (the process driver runs the
// pinned OpenClaw), and a model server of their own (a keyless OPENAI_BASE_URL: the local fake
// of the benchmarks). In Chromium: sign up (signed in at once), the guided steps, the chat page
// showing the start-up progress, the suggested first message sent while it starts and answered
// by the agent's own gateway; then the same chat with JavaScript off (a plain form post).
// Ctrl-C (SIGINT) stops everything.

const REPLY = "Hello! How can I help you today?"; // bench/fake-openai.ts
let platform: ChildProcess;
let provider: ChildProcess;
let dataDir: string;
let url: string;
let browser: Browser;
const output: string[] = [];
const email = `newcomer-${Date.now()}@example.com`;
const password = "a good long password";
// A person's browser: sign-up turns away headless user agents (bot detection).
const userAgent =
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36";

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.once("exit", (code) => resolve(code));
  });
}

beforeAll(async () => {
  // The process driver's OpenClaw: the image build's copy or one installed now, as the worker
  // would install it on a machine without Docker (decision 0103).
  await gatewayBuildFinished();
  await installOpenclaw(
    (line) => process.stdout.write(`${line}\n`),
    path.join(repo, ".data/openclaw", PINNED_OPENCLAW),
  );
  const providerPort = await freePort();
  provider = spawn(process.execPath, [path.join(repo, "bench/fake-openai.ts")], {
    env: { ...process.env, PORT: String(providerPort) },
    stdio: "ignore",
  });
  dataDir = await mkdtemp(path.join(os.tmpdir(), "newcomer-"));
  const port = await freePort();
  url = `http://localhost:${port}`;
  // What a fresh machine has: none of the test set-up's settings, nothing configured but the
  // model server and where to listen.
  const {
    DATABASE_URL: _db,
    NODE_ENV: _node,
    DEFAULT_PLAN: _plan,
    CREDENTIAL_CACHE: _cache,
    RUNTIME_POOL_SIZE: _pool,
    ...inherited
  } = process.env;
  platform = spawn(process.execPath, [path.join(repo, "start.ts")], {
    cwd: repo,
    env: {
      ...inherited,
      NODE_ENV: "development", // npm start's, when unset
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      STRIPE_SECRET_KEY: "",
      RUNTIME_DRIVER: "process",
      OPENAI_BASE_URL: `http://127.0.0.1:${providerPort}/v1`,
      OPENAI_API_KEY: "",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  for (const stream of [platform.stdout, platform.stderr]) {
    stream?.on("data", (chunk: Buffer) => output.push(chunk.toString()));
  }
  const gone = exited(platform).then((code) => {
    throw new Error(`start.ts exited with ${code}:\n${output.join("").slice(-4000)}`);
  });
  const up = (async () => {
    while (
      !(await fetch(`${url}/api/health`).then(
        (r) => r.ok,
        () => false,
      ))
    ) {
      await new Promise((r) => setTimeout(r, 200));
    }
  })();
  await Promise.race([up, gone]);
  browser = await launchBrowser();
}, 600_000);

afterAll(async () => {
  await browser?.close();
  if (platform && platform.exitCode === null) {
    platform.kill("SIGKILL");
    await exited(platform);
  }
  provider?.kill("SIGTERM");
  // The agent's gateway outlives the platform like a container outlives its engine's client.
  if (dataDir) {
    const gateways = processRuntime(path.join(dataDir, "runtime"));
    for (const c of await gateways.list({})) await gateways.remove(c.name);
  }
  if (dataDir) await rm(dataDir, { recursive: true, force: true }).catch(() => {});
});

const heading = (page: Page) => page.getByRole("heading", { level: 1 }).textContent();
/** The last answer shown, or null (no waiting for it: the caller polls). */
const lastAnswer = (page: Page) =>
  page
    .getByTestId("messages")
    .locator('li[data-role="assistant"]')
    .last()
    .textContent({ timeout: 1_000 })
    .catch(() => null);

describe("a newcomer on a fresh `npm start` (payments off, no Docker, a local model server)", () => {
  let chatPath = "";

  it("signs up, creates an agent, watches it start and gets its first reply (JavaScript on)", async () => {
    const context = await browser.newContext({ userAgent });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));

    await page.goto(`${url}/signup`);
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Create account" }).click();
    await expect
      .poll(() => new URL(page.url()).pathname)
      .toBe("/welcome")
      .catch(async (error) => {
        process.stdout.write(
          `page: ${(await page.locator("main").textContent())?.slice(0, 800)}\n`,
        );
        process.stdout.write(`platform: ${output.join("").slice(-3000)}\n`);
        throw error;
      });

    await page.getByLabel("What should your agent be called?").fill("Ada");
    await page.getByRole("button", { name: "Next: pick a model" }).click();
    // The models the local server lists (free: decision 0157).
    await expect
      .poll(() => page.getByRole("radio", { name: /gpt-4o-mini/ }).count())
      .toBeGreaterThan(0);
    await page
      .getByRole("radio", { name: /gpt-4o-mini/ })
      .first()
      .check();
    await page.getByRole("button", { name: "Next: connect a chat app" }).click();
    await page.getByRole("radio", { name: "Not now: only chat here" }).check();
    await page.getByRole("button", { name: "Create my agent" }).click();

    await expect.poll(() => new URL(page.url()).pathname).toMatch(/^\/agents\/agt_\w+\/chat$/);
    chatPath = new URL(page.url()).pathname;
    await expect.poll(() => heading(page)).toBe("Chat with Ada");
    // The start-up is shown while it runs (the process driver boots OpenClaw: about a minute).
    await expect
      .poll(() => page.getByTestId("agent-starting").textContent())
      .toMatch(/^Your agent is starting/);

    // The suggested first message, sent at once: the chat waits for the start and answers.
    const t0 = Date.now();
    await expect
      .poll(() => page.getByLabel("Message").inputValue())
      .toMatch(/^Hi! Introduce yourself/);
    await page.getByRole("button", { name: "Send" }).click();
    await expect
      .poll(() => lastAnswer(page), { timeout: 420_000, interval: 500 })
      .toContain(REPLY)
      .catch(async (error) => {
        process.stdout.write(
          `page: ${(await page.locator("main").textContent())?.slice(0, 1500)}\n`,
        );
        throw error;
      });
    process.stdout.write(`newcomer: create → first reply ${Date.now() - t0} ms\n`);
    await expect.poll(() => page.getByTestId("agent-starting").count()).toBe(0);
    expect(await page.getByText(/Agent gateway unavailable/).count()).toBe(0);
    expect(errors).toEqual([]);
    await context.close();
  }, 600_000);

  it("the same chat answers a plain form post (JavaScript off)", async () => {
    expect(chatPath).not.toBe("");
    const context = await browser.newContext({ javaScriptEnabled: false, userAgent });
    const page = await context.newPage();
    await page.goto(`${url}/signin`);
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(password);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await expect.poll(() => new URL(page.url()).pathname).not.toBe("/signin");
    await page.goto(`${url}${chatPath}`);
    await page.getByLabel("Message").fill("And without JavaScript?");
    await page.getByRole("button", { name: "Send" }).click();
    await expect.poll(() => lastAnswer(page), { timeout: 120_000 }).toContain(REPLY);
    expect(await page.getByText(/Agent gateway unavailable/).count()).toBe(0);
    await context.close();
  }, 180_000);

  it("Ctrl-C stops web, worker and the database", async () => {
    platform.kill("SIGINT");
    expect(await exited(platform)).toBe(0);
    const log = output.join("");
    expect(log).toContain("stopping the embedded database");
    expect(log).not.toMatch(/Database connection is not opened|unhandled/i);
  }, 120_000);
});
