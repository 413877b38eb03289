import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type InstanceRow, updateInstance } from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { provision } from "../../worker/instances/provision.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import { describeDocker } from "../runtime/docker-support.ts";
import { launchBrowser, type RunningApp } from "./app.ts";
import { type GatewayStack, REPLY, startGatewayStack, stopGatewayStack } from "./gateway-stack.ts";

// A person watches their agent start (issue 25, decision 0158), in Chromium against the whole
// stack: the built server, a local fake OpenAI-compatible provider, and a real OpenClaw gateway
// provisioned cold (with its dry run) by this process acting as the worker. With JavaScript the
// steps are pushed over the agent's event stream and a chat sent while it starts shows "your
// agent is starting", then the reply once the agent is ready; without JavaScript the status page
// refreshes itself until the agent runs.

const USER = "usr_progress_e2e";
const AGENT = "agt_progresse2e0000000";
let stack: GatewayStack | undefined;
let app: RunningApp;
let browser: Browser;
let row: InstanceRow;

describeDocker("an agent's start-up, watched", () => {
  beforeAll(async () => {
    stack = await startGatewayStack({
      user: USER,
      agent: AGENT,
      env: {
        // The dry run before ready, as a new installation does it: the first reply is not the
        // gateway's first turn (which sometimes fails right after a boot).
        RUNTIME_COLD_WARMUP: "on",
        // A shared CI machine can take minutes to boot a gateway: the test waits, it does not race.
        GATEWAY_HEALTH_TIMEOUT_MS: "420000",
      },
      // A cold start with its dry run on a loaded 2-core machine: let the chat wait for it.
      appEnv: { AGENT_CHAT_START_WAIT_MS: "600000" },
    });
    ({ app, row } = stack);
    // As POST /api/agents/provision leaves it: provisioning, the job not picked up yet.
    await updateInstance(row.id, { observed_state: "provisioning" });
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await stopGatewayStack(stack);
  });

  async function open(javaScriptEnabled: boolean, tab: string): Promise<BrowserContext> {
    const context = await browser.newContext({ javaScriptEnabled });
    const cookie = (await sessionCookieFor(USER)).split("=");
    await context.addCookies([
      { name: cookie[0] as string, value: cookie.slice(1).join("="), url: app.url },
    ]);
    const page = await context.newPage();
    await page.goto(`${app.url}/agents/${AGENT}${tab}`);
    return context;
  }

  it("pushes the steps, answers a chat sent while starting, and refreshes without JavaScript", async () => {
    // Without JavaScript: the status page, reloading itself while the agent starts.
    const plain = await open(false, "");
    const plainPage = plain.pages()[0]!;
    let reloads = 0;
    plainPage.on("framenavigated", () => reloads++);
    await expect.poll(() => plainPage.getByTestId("agent-progress").isVisible()).toBe(true);
    await expect.poll(() => plainPage.locator('meta[http-equiv="refresh"]').count()).toBe(1);

    // With JavaScript: the status page on the event stream (no reloads), and the chat.
    const watching = await open(true, "");
    const statusPage = watching.pages()[0]!;
    const streams: string[] = [];
    statusPage.on("request", (r) => {
      if (r.url().endsWith(`/api/agents/${AGENT}/events`)) streams.push(r.url());
    });
    let statusReloads = 0;
    statusPage.on("framenavigated", () => statusReloads++);
    await statusPage.waitForFunction(() => (window as { __remixContext?: unknown }).__remixContext);
    await statusPage.reload(); // the request listener sees the stream being opened
    await statusPage.waitForFunction(() => (window as { __remixContext?: unknown }).__remixContext);
    statusReloads = 0;
    await expect.poll(() => streams.length).toBeGreaterThan(0);
    // With scripts the refresh inside <noscript> is inert text: the page is never reloaded.
    expect(await statusPage.locator('meta[http-equiv="refresh"]').count()).toBe(0);

    const chat = await open(true, "/chat");
    const chatPage = chat.pages()[0]!;
    await chatPage.waitForFunction(() => (window as { __remixContext?: unknown }).__remixContext);
    await chatPage.waitForLoadState("networkidle");
    await expect
      .poll(() => chatPage.getByTestId("agent-starting").textContent())
      .toMatch(/^Your agent is starting \(0 of 5 steps done\)/);
    await chatPage.getByLabel("Message").fill("Hello while you start");
    await chatPage.getByRole("button", { name: "Send" }).click();

    // The worker's part, now: a cold provisioning with its dry run.
    const provisioning = provision(row.id);
    const done = (step: string) =>
      statusPage
        .locator(`[data-testid="agent-progress"] li[data-step="${step}"]`)
        .getAttribute("data-done");
    // Steps arrive on the open page one by one while it stays where it is.
    await expect.poll(() => done("container-created"), { timeout: 120_000 }).toBe("true");
    await expect
      .poll(() => chatPage.getByTestId("agent-starting").textContent(), { timeout: 420_000 })
      .toMatch(/^Your agent is starting \([1-4] of 5 steps done\)/);
    const result = await provisioning;
    expect(result).toMatchObject({ instanceId: row.id });
    await expect
      .poll(() => statusPage.getByTestId("agent-status").textContent(), { timeout: 30_000 })
      .toBe("running");
    expect(statusReloads).toBe(0);

    // The chat sent while starting is answered once the agent is ready.
    const assistant = chatPage.locator('[data-testid="messages"] [data-role="assistant"]');
    await expect
      .poll(() => assistant.allTextContents(), { timeout: 240_000 })
      .toEqual(expect.arrayContaining([REPLY]));
    await expect.poll(() => chatPage.getByTestId("agent-starting").count()).toBe(0);

    // Without JavaScript the page got there by itself, reloading (every 5 s) until running.
    await expect
      .poll(() => plainPage.getByTestId("agent-status").textContent(), { timeout: 30_000 })
      .toBe("running");
    expect(reloads).toBeGreaterThan(0);
    expect(await plainPage.locator('meta[http-equiv="refresh"]').count()).toBe(0);

    // The next provisioning here has an estimate: this one.
    const [run] = await db()<{ action: string; path: string; outcome: string }[]>`
      select action, path, outcome from instance_runs where instance_id = ${row.id}`;
    expect(run).toEqual({ action: "provision", path: "cold", outcome: "ready" });
    for (const context of [plain, watching, chat]) await context.close();
  }, 900_000);
});
