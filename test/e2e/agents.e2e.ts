import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { getInstanceByUser, type InstanceRow } from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { getBoss } from "../../app/server/platform/jobs.server.ts";
import { observe } from "../../worker/instances/observe.ts";
import { reconcileAll } from "../../worker/instances/reconcile.ts";
import { sampleAll } from "../../worker/instances/sampler.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import {
  allowDockerNetworks,
  cleanupTestObjects,
  describeDocker,
  ensureHealthzImage,
  testRun,
} from "../runtime/docker-support.ts";
import { launchBrowser, type RunningApp, startApp } from "./app.ts";

// The agents dashboard in a real browser, JavaScript on and off: a subscribed user provisions an
// agent and stops and starts it. The web is the built server (a child process); the worker runs
// in this process against the same database and the real Docker engine. Containers run a
// stand-in of the gateway image that answers /healthz but speaks no gateway protocol, so the
// lifecycle takes seconds; provisioning therefore ends at pairing with an error, which the page
// shows. test/agents/gateway-real.test.ts covers the real gateway. docs/decisions/0071-agents-e2e-stand-in.md

const userAgent =
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36";
const rt = new DockerRuntime({ maxCpus: 1 });
let app: RunningApp;
let browser: Browser;

describeDocker("agents dashboard (browser, Docker)", () => {
  beforeAll(async () => {
    Object.assign(process.env, {
      RUNTIME_DEPLOYMENT: testRun,
      RUNTIME_NETWORK: `agent-test-${testRun}`,
      AGENT_GATEWAY_IMAGE: ensureHealthzImage(),
      GATEWAY_HEALTH_TIMEOUT_MS: "20000",
      INSTANCE_ACTION_TIMEOUT_MS: "30000",
      // The test runs reconcile itself (the status change it makes is what the page must show).
      RECONCILE_CRON: "0 0 1 1 *",
      RUNTIME_POOL_CRON: "0 0 1 1 *",
      AI_CATALOG_REFRESH_CRON: "0 0 1 1 *",
    });
    resetEnvCache();
    setRuntime(rt);
    allowDockerNetworks();
    await startWorker({ concurrency: 2 });
    app = await startApp();
    browser = await launchBrowser();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    await stopWorker(5_000);
    setRuntime(undefined);
    await cleanupTestObjects(rt);
  });

  /** A signed-in browser for a user with an active Solo subscription (starter tier: 1 agent). */
  async function subscribedContext(userId: string, javaScriptEnabled: boolean) {
    const cookie = await sessionCookieFor(userId);
    await db()`insert into subscriptions (id, user_id, stripe_customer_id, kind, item, price_id, status)
      values (${`sub_${userId}`}, ${userId}, ${`cus_${userId}`}, 'plan', 'solo', 'price_solo', 'active')`;
    const context = await browser.newContext({ javaScriptEnabled, userAgent });
    const at = cookie.indexOf("=");
    await context.addCookies([
      { name: cookie.slice(0, at), value: cookie.slice(at + 1), url: app.url },
    ]);
    return context;
  }

  const status = (page: Page) => page.getByTestId("agent-status").textContent();

  async function provision(page: Page, name: string, javaScript: boolean): Promise<string> {
    await page.goto(`${app.url}/agents`);
    await expect.poll(() => page.getByRole("heading", { level: 1 }).textContent()).toBe("Agents");
    await expect.poll(() => page.getByText("No agents yet.").isVisible()).toBe(true);
    if (javaScript) {
      // An empty name is refused on the form (without JavaScript the browser's `required` is).
      await page.getByRole("button", { name: "Provision agent" }).click();
      await expect
        .poll(() => page.getByRole("alert").first().textContent())
        .toMatch(/Name is required/);
    }
    await page.getByLabel("Name").fill(name);
    await page.getByLabel("Model").selectOption("custom");
    await page.getByRole("button", { name: "Provision agent" }).click();
    await expect.poll(() => new URL(page.url()).pathname).toMatch(/^\/agents\/agt_\w+$/);
    await expect.poll(() => page.getByRole("heading", { level: 1 }).textContent()).toBe(name);
    await expect.poll(() => page.getByRole("status").first().textContent()).toMatch(/provisioned/);
    return new URL(page.url()).pathname.split("/").pop()!;
  }

  /**
   * Provisioning runs in the worker: container up, /healthz, then pairing, which the stand-in
   * fails. Its retries would fail the same way (and flip the status mid-test): cancelled.
   */
  async function provisioningSettled(userId: string) {
    await expect
      .poll(
        async () =>
          (
            await db()<{ observed_state: string }[]>`
            select observed_state from instances where user_id = ${userId}`
          )[0]?.observed_state,
        { timeout: 60_000 },
      )
      .toBe("error");
    const [row] = await db()<{ id: string }[]>`select id from instances where user_id = ${userId}`;
    const boss = await getBoss();
    // The attempt that just failed becomes a scheduled retry once the handler has thrown.
    const pending = async () =>
      (await boss.findJobs("provision-instance", { data: { instanceId: row!.id } }))
        .filter((j) => j.state === "retry" || j.state === "created")
        .map((j) => j.id);
    await expect.poll(async () => (await pending()).length).toBeGreaterThan(0);
    await boss.cancel("provision-instance", await pending());
  }

  /** The worker's reconcile pass, repeated until it has seen the gateway answer /healthz. */
  async function reconcileUntilRunning(userId: string) {
    await expect
      .poll(
        async () => {
          await reconcileAll();
          return (
            await db()<{ observed_state: string }[]>`
              select observed_state from instances where user_id = ${userId}`
          )[0]?.observed_state;
        },
        { interval: 500 },
      )
      .toBe("running");
  }

  it("with JavaScript: provision, then stop and start; status changes appear without a reload", async () => {
    const userId = `usr_e2e_js_${testRun}`.replace(/-/g, "_");
    const context = await subscribedContext(userId, true);
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));

    const agentId = await provision(page, "Scout", true);
    // Marks this document: if the page reloaded, the mark would be gone.
    await page.evaluate(() => {
      (window as unknown as { mark: number }).mark = 1;
    });
    const sameDocument = () =>
      page.evaluate(() => (window as unknown as { mark?: number }).mark === 1);

    await provisioningSettled(userId);
    await expect.poll(() => status(page)).toBe("error");
    await expect.poll(() => page.getByText(/Last error: provision/).isVisible()).toBe(true);
    // The worker recorded the steps it reached before pairing failed (the stand-in speaks no
    // gateway protocol), in order; GET /api/agents/:id carries the last one.
    const steps = await db()<{ step: string }[]>`
      select p.step from instance_progress p join instances i on i.id = p.instance_id
      where i.user_id = ${userId} order by p.at`;
    expect(steps.map((r) => r.step)).toEqual(["container-created", "gateway-healthy"]);
    const api = await page.request.get(`${app.url}/api/agents/${agentId}`);
    expect(((await api.json()) as { agent: { step: string } }).agent.step).toBe("gateway-healthy");

    await page.getByRole("button", { name: "Start", exact: true }).click();
    await expect.poll(() => page.getByRole("status").first().textContent()).toBe("Agent started.");
    // A start answers once the gateway answers /healthz (decision 0206): running at once, as the
    // worker's reconcile sees it too.
    await expect.poll(() => status(page)).toBe("running");
    await reconcileUntilRunning(userId);
    await expect.poll(() => status(page)).toBe("running");
    // Stats refresh too: before the worker's first sample there are no live figures.
    await expect.poll(() => page.getByTestId("agent-stats").textContent()).toMatch(/No live/);
    await sampleAll();
    await expect
      .poll(() => page.getByTestId("agent-stats").textContent())
      .toMatch(/CPU\d+\.\d\d%Memory[\d.]+MiB \/ 2GiB/);

    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await expect.poll(() => page.getByRole("status").first().textContent()).toBe("Agent stopped.");
    await expect.poll(() => status(page)).toBe("stopped");
    const [row] = await db()<{ container_name: string }[]>`
      select container_name from instances where user_id = ${userId}`;
    expect((await rt.inspect(row!.container_name))?.running).toBe(false);

    await page.getByRole("button", { name: "Start", exact: true }).click();
    await expect.poll(() => status(page)).toBe("running"); // answered once healthy (0206)
    expect((await rt.inspect(row!.container_name))?.running).toBe(true);
    await reconcileUntilRunning(userId);
    await expect.poll(() => status(page)).toBe("running");

    // The configuration editor (settings tab, "Advanced"): refused on the client when not an
    // object, saved when it is.
    await page
      .getByRole("navigation", { name: "Agent" })
      .getByRole("link", { name: "Settings" })
      .click();
    await page.getByText("Edit as JSON").click();
    const editor = page.getByLabel(/^Configuration/);
    await editor.fill("[1, 2]");
    await page.getByRole("button", { name: "Save configuration" }).click();
    await expect
      // The editor's own alert: the page may show others (no model source in this setup).
      .poll(() => page.locator("#settings-config [role=alert]").first().textContent())
      .toBe("The configuration must be a JSON object");
    await editor.fill('{"identity": {"name": "Scout"}}');
    await page.getByRole("button", { name: "Save configuration" }).click();
    await expect
      .poll(() => page.getByRole("status").first().textContent())
      .toMatch(/^Configuration saved/);
    const [saved] = await db()<
      { config: unknown }[]
    >`select config from agents where id = ${agentId}`;
    expect(saved?.config).toEqual({ identity: { name: "Scout" } });
    // The list shows it too, and its status follows without a reload.
    await page.getByRole("link", { name: "Agents", exact: true }).click();
    await expect.poll(() => page.getByTestId(`status-${agentId}`).textContent()).toBe("running");
    await rt.stop(row!.container_name, 5);
    // An observation sees it exited. (Not the sampler's pass: it queues the restart at once since
    // decision 0241, and the gateway may be back to running before the page's next update.)
    await observe((await getInstanceByUser(userId)) as InstanceRow);
    await expect
      .poll(() => page.getByTestId(`status-${agentId}`).textContent())
      .not.toBe("running");
    await reconcileUntilRunning(userId);
    await expect.poll(() => page.getByTestId(`status-${agentId}`).textContent()).toBe("running");
    expect(await sameDocument()).toBe(true);
    expect(errors).toEqual([]);
    await context.close();
  }, 180_000);

  it("without JavaScript: the same forms work as plain HTML posts", async () => {
    const userId = `usr_e2e_nojs_${testRun}`.replace(/-/g, "_");
    const context: BrowserContext = await subscribedContext(userId, false);
    const page = await context.newPage();
    const agentId = await provision(page, "Quill", false);
    await provisioningSettled(userId);
    await page.reload();
    await expect.poll(() => status(page)).toBe("error");

    await page.getByRole("button", { name: "Start", exact: true }).click();
    await expect.poll(() => page.getByRole("status").first().textContent()).toBe("Agent started.");
    // Running at once: the start answered once the gateway answered (decision 0206).
    await expect.poll(() => status(page)).toBe("running");
    await reconcileUntilRunning(userId);
    await page.reload();
    await expect.poll(() => status(page)).toBe("running");

    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await expect.poll(() => page.getByRole("status").first().textContent()).toBe("Agent stopped.");
    await expect.poll(() => status(page)).toBe("stopped");

    await page.getByRole("button", { name: "Start", exact: true }).click();
    await expect.poll(() => page.getByRole("status").first().textContent()).toBe("Agent started.");
    await expect.poll(() => status(page)).toBe("running"); // answered once healthy (0206)

    // The server validates the configuration (400, the error on the field) and keeps the text.
    await page
      .getByRole("navigation", { name: "Agent" })
      .getByRole("link", { name: "Settings" })
      .click();
    await page.getByText("Edit as JSON").click();
    await page.getByLabel(/^Configuration/).fill("{ nope");
    await page.getByRole("button", { name: "Save configuration" }).click();
    await expect
      .poll(() => page.locator("#settings-config [role=alert]").first().textContent())
      .toMatch(/^Not valid JSON/);
    await expect.poll(() => page.getByLabel(/^Configuration/).inputValue()).toBe("{ nope");

    // The log level filter (logs tab) is a GET form.
    await page
      .getByRole("navigation", { name: "Agent" })
      .getByRole("link", { name: "Logs" })
      .click();
    await page.getByLabel("Level").selectOption("error");
    await page.getByRole("button", { name: "Filter" }).click();
    await expect.poll(() => new URL(page.url()).searchParams.get("level")).toBe("error");
    await expect.poll(() => page.getByLabel("Level").inputValue()).toBe("error");

    // The starter tier allows one agent: the form is replaced by the limit notice.
    await page.goto(`${app.url}/agents`);
    await expect.poll(() => page.getByTestId(`status-${agentId}`).isVisible()).toBe(true);
    await expect
      .poll(() => page.getByText(/reached the starter tier's limit/).isVisible())
      .toBe(true);

    // Another user's agent is "not found"; signed out, the dashboard asks to sign in.
    const other = await subscribedContext(`usr_e2e_other_${testRun}`.replace(/-/g, "_"), false);
    const otherPage = await other.newPage();
    const res = await otherPage.goto(`${app.url}/agents/${agentId}`);
    expect(res?.status()).toBe(404);
    await other.close();
    const anonymous = await browser.newContext({ javaScriptEnabled: false, userAgent });
    const anonPage = await anonymous.newPage();
    await anonPage.goto(`${app.url}/agents`);
    expect(new URL(anonPage.url()).pathname).toBe("/signin");
    expect(new URL(anonPage.url()).searchParams.get("redirectTo")).toBe("/agents");
    await anonymous.close();
    await context.close();
  }, 180_000);
});
