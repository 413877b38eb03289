import { execFileSync } from "node:child_process";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { revokeAllSessions } from "../../app/server/accounts/sessions.server.ts";
import { pathFormPrefix } from "../../app/server/agents/agent-address.server.ts";
import {
  CONTROL_UI_CLIENT_ID,
  CONTROL_UI_ORPHAN_AFTER_MS,
  pairControlUiDevice,
} from "../../app/server/agents/control-ui-device.server.ts";
import {
  gatewayTokenOf,
  getInstance,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { sweepAllControlUiDevices } from "../../worker/instances/control-ui-sweep.ts";
import { connectPaired } from "../../worker/instances/pairing.ts";
import { provision } from "../../worker/instances/provision.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";
import { describeDocker } from "../runtime/docker-support.ts";
import { launchBrowser, type RunningApp, startApp, takeCspViolations } from "./app.ts";
import { type GatewayStack, REPLY, startGatewayStack, stopGatewayStack } from "./gateway-stack.ts";

// OpenClaw's own Control UI at the agent's address, in Chromium, against a real gateway (host
// form, <id>.agents.localhost, and path form, /agents/<id>/ui/ on the main origin): the ingress
// is the device the gateway sees for the owner's browser (decision 0170). The owner's UI
// connects, lists the agent's sessions and chats (the model is a local OpenAI-compatible
// stand-in behind the platform's AI layer); a stranger and a signed-out visitor get nothing;
// signing out everywhere closes the socket and removes the device from the gateway.

const USER = "usr_controlui_owner";
const STRANGER = "usr_controlui_other";
const AGENT = "agt_controlui000000000";
let stack: GatewayStack | undefined;
let app: RunningApp;
let browser: Browser;
let instance: InstanceRow;
let agentUrl: string;

async function signedIn(userId: string): Promise<BrowserContext> {
  const cookie = await sessionCookieFor(userId);
  const context = await browser.newContext();
  const at = cookie.indexOf("=");
  await context.addCookies([
    { name: cookie.slice(0, at), value: cookie.slice(at + 1), url: app.url },
  ]);
  return context;
}

/** The Control UI devices the gateway has paired (the platform's own device is not one). */
async function controlUiDevices(): Promise<string[]> {
  const { client } = await connectPaired(instance, instance.gateway_address as string);
  try {
    const list = await client.request<{ paired?: Array<{ deviceId: string; clientId?: string }> }>(
      "device.pair.list",
      {},
    );
    return (list.paired ?? [])
      .filter((d) => d.deviceId !== instance.device_id)
      .map((d) => d.deviceId);
  } finally {
    client.close();
  }
}

/**
 * The page's HTML once it has loaded. The Control UI can still be navigating when a test reads
 * it (seen in CI with two files at a time), and the page cannot be read meanwhile.
 */
async function contentOf(page: Page): Promise<string> {
  for (;;) {
    try {
      return await page.content();
    } catch (error) {
      if (!String(error).includes("page is navigating")) throw error;
      await page.waitForLoadState("load");
    }
  }
}

describeDocker("the agent's Control UI", () => {
  beforeAll(async () => {
    stack = await startGatewayStack({
      user: USER,
      agent: AGENT,
      appEnv: { AGENTS_DOMAIN: "agents.localhost" },
      // Provisioned as the platform does by default, with its dry run: a gateway fresh from
      // boot sometimes ends its very first run in an error (talk.e2e.ts), and the UI's chat
      // below is sent straight to the gateway, with no platform retry. Seen once in CI: no
      // reply within 120 s.
      env: { RUNTIME_COLD_WARMUP: "on" },
    });
    app = stack.app;
    agentUrl = `http://${AGENT}.agents.localhost:${new URL(app.url).port}/`;
    await ensureUser(STRANGER);
    const row = stack.row;
    await provision(row.id);
    instance = (await getInstance(row.id)) as InstanceRow;
    browser = await launchBrowser();
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await stopGatewayStack(stack);
  });

  /** Opens the agent's address as the owner; the page and every frame its sockets received. */
  async function openAsOwner(address = agentUrl) {
    const context = await signedIn(USER);
    const page = await context.newPage();
    const frames: string[] = [];
    const sockets = { opened: 0, closed: 0 };
    const seen: string[] = [];
    page.on("console", (m) => seen.push(`console ${m.type()}: ${m.text().slice(0, 300)}`));
    page.on("response", (r) => {
      if (r.status() >= 400) seen.push(`${r.status()} ${r.url()}`);
    });
    page.on("websocket", (ws) => {
      seen.push(`socket ${ws.url()}`);
      ws.on("framesent", (f) => seen.push(`sent ${String(f.payload).slice(0, 400)}`));
      ws.on("close", () => seen.push("socket closed"));
      sockets.opened += 1;
      ws.on("framereceived", (f) => frames.push(String(f.payload)));
      ws.on("close", () => {
        sockets.closed += 1;
      });
    });
    await page.goto(address);
    return { context, page, frames, sockets, seen };
  }

  it("opens for its owner: connects, lists the agent's sessions, chats", async () => {
    const { context, page, frames, seen } = await openAsOwner();
    // Closed whatever happens: a device left paired would fail the tests after this one.
    try {
      expect(new URL(page.url()).host).toBe(new URL(agentUrl).host);
      // Connected: the gateway's hello reached the page, and the sessions it asked for.
      await expect
        .poll(() => frames.some((f) => f.includes('"hello-ok"')), { timeout: 60_000 })
        .toBe(true)
        .catch((error: Error) => {
          // What the page and its sockets said.
          const received = frames.slice(-6).map((f) => f.slice(0, 400));
          throw new Error(`${error.message}\n${[...seen.slice(-15), ...received].join("\n")}`);
        });
      await expect
        .poll(() => frames.some((f) => f.includes("agent:main:")), { timeout: 60_000 })
        .toBe(true);
      // The gateway's token and any device token never reach the browser.
      const token = gatewayTokenOf(instance);
      expect(frames.some((f) => f.includes(token) || f.includes("deviceToken"))).toBe(false);
      expect(await contentOf(page)).not.toContain(token);
      // One device paired for this socket, by the platform, with no approval step. (Once, in a
      // clean-clone CI run, the list stayed empty for the default 20 s while the page was
      // connected: the page's socket events are reported with the failure to tell why.)
      await expect
        .poll(controlUiDevices, { timeout: 60_000 })
        .toHaveLength(1)
        .catch((error: Error) => {
          throw new Error(`${error.message}\n${seen.slice(-20).join("\n")}`);
        });

      const box = page.locator("textarea").first();
      // Once in a clean-clone CI run (1eb5199) no textarea came within 60 s of a connected page
      // whose sessions and device were there: the page's text and socket events say why.
      await box.waitFor({ timeout: 60_000 }).catch(async (error: Error) => {
        const text = ((await page.textContent("body").catch(() => "")) ?? "").slice(0, 600);
        throw new Error(`${error.message}\npage: ${text}\n${seen.slice(-20).join("\n")}`);
      });
      await box.fill("Hello from the Control UI");
      await box.press("Enter");
      await expect
        .poll(() => page.getByText(REPLY).count(), { timeout: 120_000 })
        .toBeGreaterThan(0);
      // The gateway's memory with its Control UI served (decision 0170's measurement).
      const memory = execFileSync("docker", [
        "stats",
        "--no-stream",
        "--format",
        "{{.MemUsage}}",
        instance.container_id ?? instance.container_name,
      ]);
      process.stdout.write(`control ui gateway memory ${String(memory).trim()}\n`);
    } finally {
      await context.close();
    }
    // The socket closed: its device is gone from the gateway.
    await expect.poll(controlUiDevices, { timeout: 30_000 }).toEqual([]);
  }, 240_000);

  it("the path form on the main origin serves the same UI: connects and chats", async () => {
    // With AGENTS_DOMAIN set the path form is off (decision 0200) …
    const off = await fetch(`${app.url}${pathFormPrefix(AGENT)}`, {
      headers: { cookie: await sessionCookieFor(USER) },
      redirect: "manual",
    });
    expect(off.status).toBe(404);
    // … so it is served by a web of an installation without agents' own hosts (same database;
    // the session cookie is host-wide, so it reaches this port too).
    const pathApp = await startApp({ AGENTS_DOMAIN: "" });
    try {
      const address = `${pathApp.url}${pathFormPrefix(AGENT)}`;
      const { context, page, frames, seen } = await openAsOwner(address);
      try {
        await expect
          .poll(() => frames.some((f) => f.includes('"hello-ok"')), { timeout: 60_000 })
          .toBe(true)
          .catch((error: Error) => {
            throw new Error(`${error.message}\n${seen.slice(-15).join("\n")}`);
          });
        // The app's own links stay under the prefix.
        expect(new URL(page.url()).pathname.startsWith(pathFormPrefix(AGENT))).toBe(true);
        // Nothing failed, but the owner's avatar: the gateway answers it 404 when the owner has
        // none (no upload, no Gravatar), and the UI draws initials; whether the UI asks for it
        // before this line depends on how soon it lists the sessions.
        const users = `404 ${pathApp.url}${pathFormPrefix(AGENT)}api/users/`;
        const noAvatar = (s: string) =>
          s.startsWith(users) && /^[^/?]+\/avatar(\?|$)/.test(s.slice(users.length));
        expect(seen.filter((s) => /^[45]\d\d /.test(s) && !noAvatar(s))).toEqual([]);
        // The session from the first test is listed now, and its menu brings hidden text fields.
        const box = page.locator("textarea:visible").first();
        await box.waitFor({ timeout: 60_000 });
        await box.fill("Hello through the path form");
        await box.press("Enter");
        // The run's final event came back over this page's socket, and the reply is shown.
        await expect
          .poll(() => frames.some((f) => f.includes('"event":"chat"') && f.includes('"final"')), {
            timeout: 120_000,
          })
          .toBe(true);
        await expect.poll(() => page.getByText(REPLY).count()).toBeGreaterThan(0);
      } finally {
        await context.close();
      }
      await expect.poll(controlUiDevices, { timeout: 30_000 }).toEqual([]);
    } finally {
      await pathApp.stop();
    }
  }, 240_000);

  it("a device left paired by a web process that died is removed by the worker's sweep", async () => {
    // What a killed web process leaves: a socket's device, paired, its key gone with the process.
    const left = await pairControlUiDevice(instance, {
      id: CONTROL_UI_CLIENT_ID,
      mode: "webchat",
      platform: "web",
      deviceFamily: "",
    });
    await expect.poll(controlUiDevices).toEqual([left.device.deviceId]);
    // Young and unconnected: a socket may still be connecting with it.
    expect(await sweepAllControlUiDevices()).toEqual({});
    expect(await controlUiDevices()).toEqual([left.device.deviceId]);
    const later = Date.now() + CONTROL_UI_ORPHAN_AFTER_MS + 1_000;
    expect(await sweepAllControlUiDevices(later)).toEqual({
      [instance.id]: [left.device.deviceId],
    });
    expect(await controlUiDevices()).toEqual([]);
  });

  it("refuses another user and a signed-out visitor", async () => {
    const other = await signedIn(STRANGER);
    const strangerPage = await other.newPage();
    expect((await strangerPage.goto(agentUrl))?.status()).toBe(404);
    await other.close();

    const visitor = await browser.newContext();
    const page = await visitor.newPage();
    await page.goto(agentUrl);
    expect(new URL(page.url()).pathname).toBe("/signin");
    await visitor.close();
  });

  it("signing out everywhere closes the UI's socket and removes its device", async () => {
    const { context, frames, sockets } = await openAsOwner();
    await expect
      .poll(() => frames.some((f) => f.includes('"hello-ok"')), { timeout: 60_000 })
      .toBe(true);
    await expect.poll(controlUiDevices).toHaveLength(1);
    const open = sockets.opened - sockets.closed;
    await revokeAllSessions(USER);
    // The ingress re-checks open sockets every 30 s; the UI's attempts to reconnect are refused.
    await expect
      .poll(() => sockets.opened - sockets.closed, { timeout: 60_000 })
      .toBeLessThan(open);
    await expect.poll(controlUiDevices, { timeout: 30_000 }).toEqual([]);
    await context.close();
    // Signed out, every request of the open page is sent to sign in on the main origin, which
    // the gateway's CSP blocks (connect, img, script sources; framing): expected from that page.
    const elsewhere = takeCspViolations().filter((v) => !v.startsWith(agentUrl));
    expect(elsewhere).toEqual([]);
  }, 120_000);
});
