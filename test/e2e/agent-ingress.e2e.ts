import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser, BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { seal } from "../../app/server/platform/crypto.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";
import { launchBrowser, type RunningApp, startApp } from "./app.ts";

// An agent's own address in Chromium through the built web server (host form,
// <id>.agents.localhost, which Chromium resolves to loopback): the owner is handed over from the
// main origin and the page's socket reaches the gateway; a stranger, a signed-out visitor, a
// replayed hand-off and another site's socket are refused. The gateway here is a stand-in page
// with a WebSocket echo (what the browser and the ingress do does not depend on OpenClaw).

let app: RunningApp;
let appUrl: string;
let browser: Browser;
let gateway: Server;
let socketsOpened = 0;
/** Another site: a page of its own origin (no CSP of the platform's). */
let elsewhere: Server;
const owner = "usr_e2eingressowner";
const stranger = "usr_e2eingressstranger";
const agentId = "agt_e2eingress0000001";

const PAGE = `<!doctype html><title>Stand-in Control UI</title><p id="status">loading</p>
<script>
  const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
  ws.onmessage = (e) => { document.getElementById("status").textContent = "echo: " + e.data; };
  ws.onopen = () => ws.send("hello gateway");
</script>`;

function startGateway(): Promise<string> {
  gateway = createServer((req, res) => {
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
    res.end(req.url === "/" ? PAGE : `path ${req.url}`);
  });
  new WebSocket.Server({ server: gateway }).on("connection", (ws) => {
    socketsOpened += 1;
    ws.on("message", (data: Buffer) => ws.send(String(data)));
  });
  return new Promise((resolve) =>
    gateway.listen(0, "127.0.0.1", () =>
      resolve(`127.0.0.1:${(gateway.address() as AddressInfo).port}`),
    ),
  );
}

async function signedIn(userId: string): Promise<BrowserContext> {
  const cookie = await sessionCookieFor(userId);
  const context = await browser.newContext();
  const at = cookie.indexOf("=");
  await context.addCookies([
    { name: cookie.slice(0, at), value: cookie.slice(at + 1), url: appUrl },
  ]);
  return context;
}

describe("agent ingress (browser)", () => {
  let agentUrl: string;

  beforeAll(async () => {
    const address = await startGateway();
    for (const user of [owner, stranger]) await ensureUser(user);
    await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
      values (${agentId}, ${owner}, 'Helper', 'main', 'openai/gpt-4o-mini', 'starter')`;
    await db()`insert into instances (id, user_id, container_name, volume_name,
        gateway_token_sealed, gateway_address, observed_state, desired_state)
      values ('ins_e2eingress', ${owner}, 'c_e2eingress', 'v_e2eingress', ${seal("gateway-token")},
              ${address}, 'running', 'running')`;
    app = await startApp({ AGENTS_DOMAIN: "agents.localhost" });
    const port = new URL(app.url).port;
    appUrl = `http://localhost:${port}`;
    agentUrl = `http://${agentId}.agents.localhost:${port}/`;
    browser = await launchBrowser();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    for (const server of [gateway, elsewhere]) {
      server?.closeAllConnections();
      server?.close();
    }
  });

  it("lets the owner in through a one-time hand-off, and refuses the hand-off's replay", async () => {
    const context = await signedIn(owner);
    const page = await context.newPage();
    const handoffs: string[] = [];
    page.on("request", (r) => {
      if (r.url().includes("/__ingress/handoff")) handoffs.push(r.url());
    });
    await page.goto(agentUrl);
    expect(page.url()).toBe(agentUrl);
    await expect.poll(() => page.locator("#status").textContent()).toBe("echo: hello gateway");
    // The host's session cookie is the host's alone; the platform's never leaves its origin.
    const cookies = await context.cookies(agentUrl);
    expect(cookies.map((c) => c.name)).toEqual(["__agent_ingress"]);
    expect(cookies[0]).toMatchObject({ httpOnly: true, domain: `${agentId}.agents.localhost` });
    expect(handoffs).toHaveLength(1);

    const replayer = await browser.newContext();
    const replay = await replayer.newPage();
    const answer = await replay.goto(handoffs[0] as string);
    expect(answer?.status()).toBe(403);
    expect(await replayer.cookies(agentUrl)).toEqual([]);
    await replayer.close();
    await context.close();
  });

  it("sends a signed-out visitor to sign in, and answers another user 404", async () => {
    const visitor = await browser.newContext();
    const page = await visitor.newPage();
    await page.goto(agentUrl);
    const landed = new URL(page.url());
    expect(landed.origin).toBe(appUrl);
    expect(landed.pathname).toBe("/signin");
    expect(landed.searchParams.get("redirectTo")).toBe(`/agents/${agentId}/open?next=%2F`);
    await visitor.close();

    const other = await signedIn(stranger);
    const strangerPage = await other.newPage();
    const answer = await strangerPage.goto(agentUrl);
    expect(answer?.status()).toBe(404);
    expect(await other.cookies(agentUrl)).toEqual([]);
    await other.close();
  });

  it("refuses a socket to the agent opened by another site's page, and a forged host", async () => {
    const context = await signedIn(owner);
    const page = await context.newPage();
    await page.goto(agentUrl);
    await expect.poll(() => page.locator("#status").textContent()).toBe("echo: hello gateway");
    // A page of another site tries to open the owner's socket with the owner's browser.
    const opened = socketsOpened;
    elsewhere = createServer((_req, res) => res.end("<!doctype html><title>elsewhere</title>"));
    await new Promise<void>((resolve) => elsewhere.listen(0, "127.0.0.1", resolve));
    const other = await context.newPage();
    await other.goto(`http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}/`);
    // A string, so that the browser's WebSocket is meant (not the module's import of ws).
    const socketUrl = `${agentUrl.replace("http:", "ws:")}ws`;
    const outcome = await other.evaluate(`new Promise((resolve) => {
      const ws = new WebSocket(${JSON.stringify(socketUrl)});
      ws.onopen = () => resolve("open");
      ws.onerror = () => resolve("refused");
    })`);
    expect(outcome).toBe("refused");
    expect(socketsOpened).toBe(opened);
    await context.close();

    // A Host naming the agent on another port, with the owner's host cookie: nothing proxied.
    const forged = await new Promise<number>((resolve, reject) => {
      const { hostname, port } = new URL(app.url);
      request(
        { hostname, port, path: "/", headers: { host: `${agentId}.agents.localhost:1` } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      )
        .on("error", reject)
        .end();
    });
    expect(forged).toBe(404);
  });
});
