import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, request, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { gzipSync } from "node:zlib";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { loader as openLoader } from "../../app/routes/agents.$id.open.ts";
import {
  createSession,
  revokeAllSessions,
  revokeSession,
} from "../../app/server/accounts/sessions.server.ts";
import { agentAddress } from "../../app/server/agents/agent-address.server.ts";
import {
  agentIngressAuthority,
  HANDOFF_PATH,
  IDENTITY_HEADER,
  INGRESS_COOKIE,
  startHandoff,
} from "../../app/server/agents/agent-ingress.server.ts";
import { seal } from "../../app/server/platform/crypto.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { createIngress, type Ingress } from "../../app/server/platform/web/ingress-proxy.server.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// The ingress's auth, hand-off and proxy logic against a stand-in gateway (HTTP + WebSocket):
// host form and path form, owners and strangers, hand-off replay, forged hosts, cross-site
// sockets, body limits, timeouts, connection caps and revocation. The real gateway and Chromium
// are in test/e2e/agent-ingress.e2e.ts.

const APP = "http://localhost:3000";
const DOMAIN = "agents.localhost";

// --- the stand-in gateway: echoes what reached it -------------------------------------------
interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  bytes: number;
}
const seen: Seen[] = [];
// The shape of OpenClaw's Control UI page as its gateway serves it at its root.
const INLINE = "<script>var html = '<img src=\"/inline.png\">';</script>";
const CONTROL_UI_PAGE = `<!doctype html><html lang="en" data-openclaw-control-ui-base-path="" data-x="1"><head>
<link rel="icon" href="/favicon.svg" /><link rel="manifest" href="//cdn.example/m.json" />
<script type="module" crossorigin src="/assets/index-1.js"></script>${INLINE}</head>
<body><a href="https://openclaw.ai/">docs</a></body></html>`;
let gateway: Server;
let gatewayWss: WebSocket.Server;
const gatewaySockets = new Set<WebSocket>();

function startGateway(): Promise<string> {
  gateway = createServer((req, res) => {
    let bytes = 0;
    req.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
    });
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, bytes });
      if (req.url === "/slow") return; // never answers
      if (req.url?.startsWith("/__openclaw__/canvas/")) {
        // An agent-written canvas file, with the headers a hostile gateway would like to send.
        res.writeHead(200, {
          "Content-Type": "text/html",
          "Content-Security-Policy": "default-src *",
          "X-Content-Type-Options": "sniff-away",
          "Set-Cookie": "__session=forged; Path=/",
          "Service-Worker-Allowed": "/",
          "Access-Control-Allow-Origin": "https://evil.example",
          "Access-Control-Allow-Credentials": "true",
        });
        res.end("<script>fetch('/api/keys', {method: 'POST'})</script>");
        return;
      }
      if (req.url === "/page") {
        // Compressed when the client allows it, as a gateway behind compression middleware.
        if (/gzip/.test(String(req.headers["accept-encoding"] ?? ""))) {
          res.writeHead(200, {
            "Content-Type": "text/html; charset=utf-8",
            "Content-Encoding": "gzip",
          });
          res.end(gzipSync(CONTROL_UI_PAGE));
          return;
        }
        res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
        res.end(CONTROL_UI_PAGE);
        return;
      }
      res.writeHead(200, { "Content-Type": "application/json", "Set-Cookie": "gw=1" });
      res.end(JSON.stringify({ url: req.url, bytes }));
    });
  });
  gatewayWss = new WebSocket.Server({ server: gateway });
  gatewayWss.on("connection", (ws, req) => {
    gatewaySockets.add(ws);
    ws.on("close", () => gatewaySockets.delete(ws));
    ws.send(
      JSON.stringify({
        hello: req.url,
        cookie: req.headers.cookie ?? null,
        user: req.headers[IDENTITY_HEADER] ?? null,
      }),
    );
    ws.on("message", (data: Buffer) => ws.send(data));
  });
  return new Promise((resolve) =>
    gateway.listen(0, "127.0.0.1", () => {
      resolve(`127.0.0.1:${(gateway.address() as AddressInfo).port}`);
    }),
  );
}

// --- the web side: the ingress in front of a 418 "rest of the app" -------------------------
let web: Server;
let webPort: number;
let ingress: Ingress;

function startWeb(limits: Parameters<typeof createIngress>[1] = {}): Promise<void> {
  ingress = createIngress(agentIngressAuthority, limits);
  web = createServer((req, res) => {
    if (!ingress.handle(req, res)) res.writeHead(418).end("app");
  });
  web.on("upgrade", (req, socket: Socket, head: Buffer) => {
    if (!ingress.upgrade(req, socket, head)) socket.end("HTTP/1.1 404 Not Found\r\n\r\n");
  });
  return new Promise((resolve) =>
    web.listen(0, "127.0.0.1", () => {
      webPort = (web.address() as AddressInfo).port;
      resolve();
    }),
  );
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}
function fetchVia(
  path: string,
  headers: Record<string, string>,
  options: { method?: string; body?: Buffer } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port: webPort, path, method: options.method ?? "GET", headers },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          body += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/** Opens a socket; resolves with it (open) or with the HTTP status of the refused upgrade. */
function openSocket(
  path: string,
  headers: Record<string, string>,
): Promise<{ ws: WebSocket; first: Promise<string> } | { status: number }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://127.0.0.1:${webPort}${path}`, { headers });
    const first = new Promise<string>((r) => ws.once("message", (d) => r(String(d))));
    ws.once("open", () => resolve({ ws, first }));
    ws.once("unexpected-response", (_req, res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0 });
    });
    ws.once("error", reject);
  });
}

// --- data -----------------------------------------------------------------------------------
const owner = "usr_ingressowner";
const stranger = "usr_ingressstranger";
const ownerAgent = "agt_ingressowner000001";
const strangerAgent = "agt_ingressstranger001";
let gatewayAddress: string;

async function agentFor(userId: string, agentId: string, address: string) {
  await ensureUser(userId);
  await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
    values (${agentId}, ${userId}, 'Helper', 'main', 'openai/gpt-4o-mini', 'starter')`;
  await db()`insert into instances (id, user_id, container_name, volume_name, gateway_token_sealed,
      gateway_address, observed_state, desired_state)
    values (${`ins_${userId}`}, ${userId}, ${`c_${userId}`}, ${`v_${userId}`},
            ${seal("gateway-token")}, ${address}, 'running', 'running')`;
}

const hostOf = (id: string) => `${id}.${DOMAIN}:3000`;
const originOf = (id: string) => `http://${hostOf(id)}`;

/** Hand-off from the main origin: the token URL the open route sends the owner to. */
async function handoffUrl(next = "/"): Promise<URL> {
  const cookie = await sessionCookieFor(owner);
  const res = await openLoader({
    request: new Request(`${APP}/agents/${ownerAgent}/open?next=${encodeURIComponent(next)}`, {
      headers: { cookie },
    }),
    params: { id: ownerAgent },
    context: {},
  });
  expect(res.status).toBe(302);
  return new URL(res.headers.get("location") as string);
}

/** Signs the owner in on the agent's host; the host's cookie. */
async function signInOnHost(): Promise<string> {
  const url = await handoffUrl("/chat?x=1");
  expect(url.origin + url.pathname).toBe(`${originOf(ownerAgent)}${HANDOFF_PATH}`);
  const res = await fetchVia(url.pathname + url.search, { host: hostOf(ownerAgent) });
  expect(res.status).toBe(303);
  expect(res.headers.location).toBe("/chat?x=1");
  const setCookie = String(res.headers["set-cookie"]);
  expect(setCookie).toContain("HttpOnly");
  expect(setCookie).toMatch(new RegExp(`^${INGRESS_COOKIE}=`));
  expect(setCookie).not.toContain("Domain=");
  return setCookie.split(";")[0] as string;
}

beforeAll(async () => {
  process.env.APP_URL = APP;
  process.env.AGENTS_DOMAIN = DOMAIN;
  resetEnvCache();
  gatewayAddress = await startGateway();
  await agentFor(owner, ownerAgent, gatewayAddress);
  await agentFor(stranger, strangerAgent, gatewayAddress);
  await startWeb();
});

afterEach(() => {
  seen.length = 0;
});

afterAll(async () => {
  for (const ws of gatewaySockets) ws.terminate();
  web.closeAllConnections();
  gateway.closeAllConnections();
  await Promise.all([once(web.close(), "close"), once(gateway.close(), "close")]);
  delete process.env.AGENTS_DOMAIN;
  resetEnvCache();
});

describe("addresses", () => {
  it("names the host form on APP_URL's scheme and port, the path form without a domain", () => {
    expect(agentAddress(ownerAgent)).toEqual({
      subdomain: `${ownerAgent}.${DOMAIN}`,
      url: `http://${ownerAgent}.${DOMAIN}:3000/`,
    });
    delete process.env.AGENTS_DOMAIN;
    resetEnvCache();
    try {
      expect(agentAddress(ownerAgent).url).toBe(`${APP}/agents/${ownerAgent}/ui/`);
    } finally {
      process.env.AGENTS_DOMAIN = DOMAIN;
      resetEnvCache();
    }
  });
});

describe("host form", () => {
  it("leaves every other host to the app", async () => {
    const res = await fetchVia("/", { host: "localhost:3000" });
    expect(res.status).toBe(418);
  });

  it("sends a signed-out visitor to sign in on the main origin and back", async () => {
    const res = await fetchVia("/sessions?a=1", { host: hostOf(ownerAgent) });
    expect(res.status).toBe(303);
    expect(res.headers.location).toBe(
      `${APP}/agents/${ownerAgent}/open?next=${encodeURIComponent("/sessions?a=1")}`,
    );
    // The open route itself asks a signed-out visitor to sign in and come back to it.
    const open = await openLoader({
      request: new Request(res.headers.location as string),
      params: { id: ownerAgent },
      context: {},
    }).catch((thrown: Response) => thrown);
    expect(open.status).toBe(302);
    expect(open.headers.get("location")).toBe(
      `/signin?redirectTo=${encodeURIComponent(`/agents/${ownerAgent}/open?next=%2Fsessions%3Fa%3D1`)}`,
    );
    expect(seen).toHaveLength(0);
  });

  it("hands the owner over once and proxies with no platform credential", async () => {
    const cookie = await signInOnHost();
    const platformCookie = await sessionCookieFor(owner);
    const res = await fetchVia("/chat?x=1", {
      host: hostOf(ownerAgent),
      cookie: `${cookie}; ${platformCookie}`,
      authorization: "Bearer sk_secret",
      [IDENTITY_HEADER]: stranger,
      "x-forwarded-for": "203.0.113.9",
    });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ url: "/chat?x=1", bytes: 0 });
    expect(seen[0]?.headers.cookie).toBeUndefined();
    // The visitor's Authorization is replaced by the gateway's own (its Control UI's endpoints
    // need it; decision 0170): the instance's token, which never reaches the browser.
    expect(seen[0]?.headers.authorization).toBe("Bearer gateway-token");
    expect(res.body).not.toContain("gateway-token");
    // The gateway hears who the platform signed in, not what the visitor claims.
    expect(seen[0]?.headers[IDENTITY_HEADER]).toBe(owner);
    // No forwarded headers: the gateway would refuse them from a proxy it does not trust.
    expect(seen[0]?.headers["x-forwarded-for"]).toBeUndefined();
    expect(seen[0]?.headers["x-forwarded-host"]).toBeUndefined();
    // The gateway sets no cookie on the platform's hosts; the page may not be framed.
    expect(res.headers["set-cookie"]).toBeUndefined();
    expect(res.headers["x-frame-options"]).toBe("DENY");
  });

  it("serves a canvas file on the agent's host in a CSP sandbox", async () => {
    const cookie = await signInOnHost();
    const canvas = await fetchVia("/__openclaw__/canvas/board.html", {
      host: hostOf(ownerAgent),
      cookie,
      accept: "text/html",
    });
    expect(canvas.status).toBe(200);
    expect(canvas.headers["content-security-policy"]).toBe("sandbox");
    expect(canvas.headers["x-content-type-options"]).toBe("nosniff");
    expect(canvas.headers["set-cookie"]).toBeUndefined();
  });

  it("sends the owner after the hand-off only to a path on the agent's host", async () => {
    for (const next of [
      "/\\evil.example",
      "//evil.example",
      "https://evil.example",
      "/%5Cevil.example",
      "/\t/evil.example",
      "javascript:alert(1)",
    ]) {
      const url = await handoffUrl(next);
      const res = await fetchVia(url.pathname + url.search, { host: hostOf(ownerAgent) });
      expect(res.status, next).toBe(303);
      expect(res.headers.location, next).toBe("/");
    }
    // A target stored before the check (or altered in the table) is checked again on the way out.
    const url = await handoffUrl("/fine");
    await db()`update agent_ingress_handoffs set next_path = ${"/\\evil.example"}
      where used_at is null`;
    const res = await fetchVia(url.pathname + url.search, { host: hostOf(ownerAgent) });
    expect(res.headers.location).toBe("/");
  });

  it("refuses a replayed, expired or foreign-host hand-off token", async () => {
    const url = await handoffUrl();
    const first = await fetchVia(url.pathname + url.search, { host: hostOf(ownerAgent) });
    expect(first.status).toBe(303);
    const replay = await fetchVia(url.pathname + url.search, { host: hostOf(ownerAgent) });
    expect(replay.status).toBe(403);
    expect(replay.headers["set-cookie"]).toBeUndefined();

    const elsewhere = await handoffUrl();
    const onOtherHost = await fetchVia(elsewhere.pathname + elsewhere.search, {
      host: hostOf(strangerAgent),
    });
    expect(onOtherHost.status).toBe(403);

    const late = await handoffUrl();
    await db()`update agent_ingress_handoffs set expires_at = now() - interval '1 second'
      where used_at is null`;
    const expired = await fetchVia(late.pathname + late.search, { host: hostOf(ownerAgent) });
    expect(expired.status).toBe(403);
    // Stored hashed: the token itself is nowhere in the table.
    const token = late.searchParams.get("token") as string;
    const rows = await db()`select 1 from agent_ingress_handoffs
      where encode(token_hash, 'escape') like ${`%${token}%`}`;
    expect(rows).toHaveLength(0);
  });

  it("answers 404 for another user's agent, also with the owner's cookie on a forged host", async () => {
    const cookie = await signInOnHost();
    const forged = await fetchVia("/", { host: hostOf(strangerAgent), cookie });
    expect(forged.status).toBe(303); // no session on that host: off to the main origin …
    const open = await openLoader({
      request: new Request(`${APP}/agents/${strangerAgent}/open`, {
        headers: { cookie: await sessionCookieFor(owner) },
      }),
      params: { id: strangerAgent },
      context: {},
    }).catch((thrown: Response) => thrown);
    expect(open.status).toBe(404); // … which refuses to hand anyone but the owner over
    expect(await startHandoff("ses_x", owner, strangerAgent, "/")).toBeUndefined();
    // Odd spellings of a host (upper case twin, other port, unknown id) get nothing.
    for (const host of [
      `${ownerAgent}.${DOMAIN}:4000`,
      `x.${ownerAgent}.${DOMAIN}:3000`,
      `agt_nosuchagent.${DOMAIN}:3000`,
    ]) {
      const res = await fetchVia("/", { host, cookie });
      expect([303, 404]).toContain(res.status);
      if (res.status === 303) expect(res.headers.location).toContain("/open?");
    }
    expect(seen).toHaveLength(0);
  });

  it("proxies WebSockets from the agent's own page only", async () => {
    const cookie = await signInOnHost();
    const own = await openSocket("/ws", {
      host: hostOf(ownerAgent),
      cookie,
      origin: originOf(ownerAgent),
    });
    if (!("ws" in own)) throw new Error(`refused: ${own.status}`);
    expect(JSON.parse(await own.first)).toEqual({ hello: "/ws", cookie: null, user: owner });
    const echoed = new Promise<string>((r) => own.ws.once("message", (d) => r(String(d))));
    own.ws.send("ping through");
    expect(await echoed).toBe("ping through");
    own.ws.close();

    for (const origin of [originOf(strangerAgent), "http://evil.example", "null", APP]) {
      const cross = await openSocket("/ws", { host: hostOf(ownerAgent), cookie, origin });
      expect(cross).toEqual({ status: 403 });
    }
    const noOrigin = await openSocket("/ws", { host: hostOf(ownerAgent), cookie });
    expect(noOrigin).toEqual({ status: 403 });
    const signedOut = await openSocket("/ws", {
      host: hostOf(ownerAgent),
      origin: originOf(ownerAgent),
    });
    expect(signedOut).toEqual({ status: 401 });
  });

  it("ends the host's session and its open sockets when the owner signs out everywhere", async () => {
    const cookie = await signInOnHost();
    web.close();
    await startWeb({ recheckMs: 50 });
    const open = await openSocket("/ws", {
      host: hostOf(ownerAgent),
      cookie,
      origin: originOf(ownerAgent),
    });
    if (!("ws" in open)) throw new Error(`refused: ${open.status}`);
    await open.first;
    const closed = new Promise<number>((r) => open.ws.once("close", (code) => r(code)));
    await revokeAllSessions(owner);
    expect(await closed).toBe(4401); // "credential revoked" (decision 0198)
    const after = await fetchVia("/", { host: hostOf(ownerAgent), cookie });
    expect(after.status).toBe(303);
    expect(after.headers.location).toContain("/open?");
  });
});

/** The path form is served only on installations without agents' own hosts (decision 0200). */
function withoutAgentsDomain() {
  beforeEach(() => {
    delete process.env.AGENTS_DOMAIN;
    resetEnvCache();
  });
  afterEach(() => {
    process.env.AGENTS_DOMAIN = DOMAIN;
    resetEnvCache();
  });
}

describe("path form", () => {
  withoutAgentsDomain();

  it("answers 404 when AGENTS_DOMAIN is set: the host form is then the only one", async () => {
    process.env.AGENTS_DOMAIN = DOMAIN;
    resetEnvCache();
    // A fresh session: the host form's tests signed the owner out everywhere.
    const cookie = (await createSession(owner)).setCookie.split(";")[0] as string;
    for (const path of [
      `/agents/${ownerAgent}/ui/`,
      `/agents/${ownerAgent}/ui/__openclaw__/canvas/a.html`,
      `/agents/${ownerAgent}/ui`,
    ]) {
      const res = await fetchVia(path, { host: "localhost:3000", cookie });
      expect(res.status, path).toBe(404);
      expect(res.body).toBe(JSON.stringify({ error: "Agent not found" }));
    }
    const socket = await openSocket(`/agents/${ownerAgent}/ui/ws`, {
      host: "localhost:3000",
      cookie,
      origin: APP,
    });
    expect(socket).toEqual({ status: 404 });
    expect(seen).toHaveLength(0);
    // Without it, the same request is the owner's Control UI.
    delete process.env.AGENTS_DOMAIN;
    resetEnvCache();
    const served = await fetchVia(`/agents/${ownerAgent}/ui/`, { host: "localhost:3000", cookie });
    expect(served.status).toBe(200);
  });

  it("serves the gateway's other content in a CSP sandbox, without its cookies or CORS", async () => {
    const cookie = (await createSession(owner)).setCookie.split(";")[0] as string;
    const canvas = await fetchVia(`/agents/${ownerAgent}/ui/__openclaw__/canvas/board.html`, {
      host: "localhost:3000",
      cookie,
      accept: "text/html",
    });
    expect(canvas.status).toBe(200);
    expect(canvas.body).toContain("<script>");
    // The platform's headers replace the gateway's, whatever their spelling.
    expect(canvas.headers["content-security-policy"]).toBe("sandbox");
    expect(canvas.headers["x-content-type-options"]).toBe("nosniff");
    expect(canvas.headers["x-frame-options"]).toBe("DENY");
    expect(canvas.headers["set-cookie"]).toBeUndefined();
    expect(canvas.headers["service-worker-allowed"]).toBeUndefined();
    expect(canvas.headers["access-control-allow-origin"]).toBeUndefined();
    expect(canvas.headers["access-control-allow-credentials"]).toBeUndefined();
    // A form posted to any gateway path is answered in the sandbox too.
    const posted = await fetchVia(
      `/agents/${ownerAgent}/ui/chat`,
      { host: "localhost:3000", cookie, origin: APP },
      { method: "POST", body: Buffer.from("x") },
    );
    expect(posted.headers["content-security-policy"]).toBe("sandbox");
    // The Control UI's own page, files and in-app routes are not sandboxed (they run the app).
    for (const path of ["/", "/assets/index-1.js", "/favicon.svg", "/chat", "/sessions/abc"]) {
      const ui = await fetchVia(`/agents/${ownerAgent}/ui${path}`, {
        host: "localhost:3000",
        cookie,
      });
      expect(ui.status, path).toBe(200);
      expect(ui.headers["content-security-policy"], path).toBeUndefined();
      expect(ui.headers["x-content-type-options"], path).toBe("nosniff");
    }
    // A path that climbs out of the UI's folders is not the UI's.
    for (const path of ["/assets/..%2F__openclaw__/canvas/x.html", "/media/x.svg", "/api/x"]) {
      const other = await fetchVia(`/agents/${ownerAgent}/ui${path}`, {
        host: "localhost:3000",
        cookie,
      });
      expect(other.headers["content-security-policy"], path).toBe("sandbox");
    }
  });

  it("signs in with the platform session, redirects a visitor, refuses a stranger", async () => {
    const cookie = (await createSession(owner)).setCookie.split(";")[0] as string;
    const bare = await fetchVia(`/agents/${ownerAgent}/ui`, { host: "localhost:3000", cookie });
    expect(bare.status).toBe(308);
    expect(bare.headers.location).toBe(`/agents/${ownerAgent}/ui/`);

    const res = await fetchVia(`/agents/${ownerAgent}/ui/assets/app.js?v=2`, {
      host: "localhost:3000",
      cookie,
    });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).url).toBe("/assets/app.js?v=2");
    expect(seen.at(-1)?.headers.cookie).toBeUndefined();

    const visitor = await fetchVia(`/agents/${ownerAgent}/ui/`, { host: "localhost:3000" });
    expect(visitor.status).toBe(303);
    expect(visitor.headers.location).toBe(
      `/signin?redirectTo=${encodeURIComponent(`/agents/${ownerAgent}/ui/`)}`,
    );
    const strangers = await fetchVia(`/agents/${ownerAgent}/ui/`, {
      host: "localhost:3000",
      cookie: await sessionCookieFor(stranger),
    });
    expect(strangers.status).toBe(404);
    expect(strangers.body).toBe(JSON.stringify({ error: "Agent not found" }));
  });

  it("serves the Control UI's page under the prefix: its base path and asset URLs, its inline scripts untouched", async () => {
    const cookie = await sessionCookieFor(stranger);
    const page = await fetchVia(`/agents/${strangerAgent}/ui/page`, {
      host: "localhost:3000",
      cookie,
      accept: "text/html,application/xhtml+xml",
      "accept-encoding": "gzip, br",
    });
    expect(page.status).toBe(200);
    // A navigation asks the gateway for the page uncompressed, to rewrite it.
    expect(seen.at(-1)?.headers["accept-encoding"]).toBe("identity");
    const base = `/agents/${strangerAgent}/ui`;
    expect(page.body).toContain(`<html lang="en" data-openclaw-control-ui-base-path="${base}"`);
    expect(page.body).toContain(`href="${base}/favicon.svg"`);
    expect(page.body).toContain(`src="${base}/assets/index-1.js"`);
    expect(page.body).toContain('href="//cdn.example/m.json"');
    expect(page.body).toContain('href="https://openclaw.ai/"');
    expect(page.body).toContain(INLINE);
    expect(Number(page.headers["content-length"])).toBe(Buffer.byteLength(page.body));
    // HEAD: the page's headers, with no length (the rewritten page's is not known without it).
    const head = await fetchVia(
      `/agents/${strangerAgent}/ui/page`,
      { host: "localhost:3000", cookie, accept: "text/html" },
      { method: "HEAD" },
    );
    expect(head.status).toBe(200);
    expect(head.headers["content-type"]).toMatch(/^text\/html/);
    expect(head.headers["content-length"]).toBeUndefined();
    // A page that comes compressed anyway (not asked as a navigation) is decompressed and
    // rewritten the same.
    const fetched = await fetchVia(`/agents/${strangerAgent}/ui/page`, {
      host: "localhost:3000",
      cookie,
      accept: "*/*",
      "accept-encoding": "gzip",
    });
    expect(seen.at(-1)?.headers["accept-encoding"]).toBe("gzip");
    expect(fetched.headers["content-encoding"]).toBeUndefined();
    expect(fetched.body).toBe(page.body);
    // Not HTML: passed on as it came, with the visitor's encodings.
    const asset = await fetchVia(`/agents/${strangerAgent}/ui/assets/index-1.js`, {
      host: "localhost:3000",
      cookie,
      "accept-encoding": "gzip, br",
    });
    expect(seen.at(-1)?.headers["accept-encoding"]).toBe("gzip, br");
    expect(JSON.parse(asset.body).url).toBe("/assets/index-1.js");
    // The app's socket, at the base path without its slash.
    const bare = await openSocket(base, { host: "localhost:3000", cookie, origin: APP });
    if (!("ws" in bare)) throw new Error(`refused: ${bare.status}`);
    expect(JSON.parse(await bare.first)).toMatchObject({ hello: "/", user: stranger });
    bare.ws.close();
  });

  it("proxies same-origin sockets and refuses cross-site ones", async () => {
    const cookie = await sessionCookieFor(stranger);
    const path = `/agents/${strangerAgent}/ui/ws?x=1`;
    const own = await openSocket(path, { host: "localhost:3000", cookie, origin: APP });
    if (!("ws" in own)) throw new Error(`refused: ${own.status}`);
    expect(JSON.parse(await own.first)).toEqual({
      hello: "/ws?x=1",
      cookie: null,
      user: stranger,
    });
    own.ws.close();
    const cross = await openSocket(path, {
      host: "localhost:3000",
      cookie,
      origin: originOf(ownerAgent),
    });
    expect(cross).toEqual({ status: 403 });
  });

  it("closes an open socket at once with 4401 when its session is revoked (decision 0198)", async () => {
    const session = await createSession(stranger);
    const cookie = session.setCookie.split(";")[0] as string;
    const [row] = await db()<{ id: string }[]>`
      select id from sessions where user_id = ${stranger} order by created_at desc limit 1`;
    const open = await openSocket(`/agents/${strangerAgent}/ui/ws`, {
      host: "localhost:3000",
      cookie,
      origin: APP,
    });
    if (!("ws" in open)) throw new Error(`refused: ${open.status}`);
    await open.first;
    const closed = new Promise<[number, string]>((r) =>
      open.ws.once("close", (code, reason) => r([code, String(reason)])),
    );
    await revokeSession(stranger, row?.id as string);
    expect(await closed).toEqual([4401, "credential revoked"]);
  });
});

describe("limits", () => {
  withoutAgentsDomain();

  it("refuses bodies over the limit, times out a silent gateway, caps connections", async () => {
    web.close();
    await startWeb({ maxBodyBytes: 1024, responseTimeoutMs: 200, perAgent: 1, perUser: 5 });
    const cookie = await sessionCookieFor(stranger);
    const base = `/agents/${strangerAgent}/ui`;
    const headers = { host: "localhost:3000", cookie, origin: APP };

    const small = await fetchVia(`${base}/up`, headers, {
      method: "POST",
      body: Buffer.alloc(1000),
    });
    expect(JSON.parse(small.body)).toEqual({ url: "/up", bytes: 1000 });
    const big = await fetchVia(`${base}/up`, headers, { method: "POST", body: Buffer.alloc(5000) });
    expect(big.status).toBe(413);

    const slow = await fetchVia(`${base}/slow`, headers);
    expect(slow.status).toBe(504);

    const held = await openSocket(`${base}/ws`, headers);
    if (!("ws" in held)) throw new Error(`refused: ${held.status}`);
    await held.first;
    const second = await openSocket(`${base}/ws`, headers);
    expect(second).toEqual({ status: 429 });
    const closed = once(held.ws, "close");
    held.ws.close();
    await closed;
    await expect.poll(() => ingress.open().total).toBe(0);
    const again = await openSocket(`${base}/ws`, headers);
    expect("ws" in again).toBe(true);
    if ("ws" in again) again.ws.close();
  });

  it("closes the browser's socket with 1012 when the gateway goes away (the UI reconnects)", async () => {
    const cookie = await sessionCookieFor(stranger);
    const open = await openSocket(`/agents/${strangerAgent}/ui/ws`, {
      host: "localhost:3000",
      cookie,
      origin: APP,
    });
    if (!("ws" in open)) throw new Error(`refused: ${open.status}`);
    await open.first;
    const closed = new Promise<number>((r) => open.ws.once("close", (code) => r(code)));
    for (const ws of gatewaySockets) ws.terminate();
    expect(await closed).toBe(1012);
  });

  it("answers 503 while the gateway has no address and 502 when it does not answer", async () => {
    const cookie = await sessionCookieFor(stranger);
    const headers = { host: "localhost:3000", cookie };
    await db()`update instances set gateway_address = null where user_id = ${stranger}`;
    const none = await fetchVia(`/agents/${strangerAgent}/ui/`, headers);
    expect(none.status).toBe(503);
    await db()`update instances set gateway_address = '127.0.0.1:1' where user_id = ${stranger}`;
    const down = await fetchVia(`/agents/${strangerAgent}/ui/`, headers);
    expect(down.status).toBe(502);
    await db()`update instances set gateway_address = ${gatewayAddress} where user_id = ${stranger}`;
  });
});
