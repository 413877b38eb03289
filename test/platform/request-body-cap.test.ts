import { once } from "node:events";
import type { AddressInfo, Socket } from "node:net";
import type { ServerBuild } from "@remix-run/node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as importRoute from "../../app/routes/api.agents.$id.import.ts";
import * as estimateRoute from "../../app/routes/api.ai.estimate-cost.ts";
import * as webhookRoute from "../../app/routes/api.webhooks.pay.ts";
import * as signinRoute from "../../app/routes/signin.tsx";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { MAX_BODY_BYTES } from "../../app/server/platform/http.server.ts";
import { createWebServer } from "../../app/server/platform/web/web-server.server.ts";
import { endlessBody, type RawRequest, rawRequest } from "../helpers/raw-http.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import { STRIPE_TEST_WEBHOOK_SECRET, signedEvent } from "../msw/handlers/stripe.ts";

// Issue 47, finding 3: request bodies are capped while they stream, in the web server, for
// every route and page action (docs/decisions/0197). Each endless body here is bounded only by
// the client's own counter (ENDLESS), far past every cap: a server that reads bodies whole reads
// all of it before it answers.

const MiB = 1024 * 1024;
const ENDLESS = 24 * MiB;
/** What the server may read past a cap: socket reads in flight (64 KiB each) and framing. */
const MARGIN = 512 * 1024;
const IMPORT_CAP = 3 * MiB;
/** What loopback's send and receive buffers hold between the client's writes and the server. */
const KERNEL_BUFFERS = 8 * MiB;

// Page requests go through Remix, as the build gives them: a document answer is this stub.
const build = {
  routes: {
    root: { id: "root", path: "", module: { default: () => null } },
    "routes/signin": { id: "routes/signin", parentId: "root", path: "signin", module: signinRoute },
    webhook: { id: "webhook", parentId: "root", path: "api/webhooks/pay", module: webhookRoute },
    estimate: {
      id: "estimate",
      parentId: "root",
      path: "api/ai/estimate-cost",
      module: estimateRoute,
    },
    import: { id: "import", parentId: "root", path: "api/agents/:id/import", module: importRoute },
  },
  entry: {
    module: {
      default: (_request: Request, status: number) =>
        new Response("<!doctype html><p>page</p>", {
          status,
          headers: { "content-type": "text/html" },
        }),
    },
  },
  assets: {
    routes: {},
    entry: { module: "", imports: [] },
    url: "",
    version: "test",
  },
  future: { v3_singleFetch: true },
  publicPath: "/build/",
  assetsBuildDirectory: "public/build",
  isSpaMode: false,
} as unknown as ServerBuild;

const web = createWebServer({ build, publicDir: "/nonexistent" });
let port = 0;
let serverSocket: Socket | undefined;
web.on("connection", (socket: Socket) => {
  serverSocket = socket;
});
/** Bytes the server's side of the latest connection has read from it. */
const serverRead = () => serverSocket?.bytesRead ?? -1;

const send = (req: Omit<RawRequest, "port">) => rawRequest({ port, probe: serverRead, ...req });

beforeAll(async () => {
  process.env.STRIPE_WEBHOOK_SECRET = STRIPE_TEST_WEBHOOK_SECRET;
  process.env.EXPORT_MAX_BYTES = String(IMPORT_CAP);
  resetEnvCache();
  web.listen(0, "127.0.0.1");
  await once(web, "listening");
  port = (web.address() as AddressInfo).port;
});

afterAll(async () => {
  delete process.env.STRIPE_WEBHOOK_SECRET;
  delete process.env.EXPORT_MAX_BYTES;
  resetEnvCache();
  web.closeAllConnections();
  await new Promise((r) => web.close(r));
});

const tooLarge = { error: "Request body exceeds 1 MiB" };

describe("an endless chunked body", () => {
  const cases: [string, Record<string, string>][] = [
    ["/api/webhooks/pay", { "content-type": "application/json", "stripe-signature": "t=1,v1=x" }],
    ["/signin", { "content-type": "application/x-www-form-urlencoded" }],
    ["/api/ai/estimate-cost", { "content-type": "application/json" }],
  ];
  for (const [path, headers] of cases) {
    it(`to ${path} is answered 413 once it passes 1 MiB, the rest unread`, async () => {
      const res = await send({ path, headers, chunks: endlessBody(ENDLESS) });
      expect(res.status).toBe(413);
      expect(JSON.parse(res.body)).toEqual(tooLarge);
      expect(res.headers.connection).toBe("close");
      // The server read the cap and little more (about 1.2 MiB here)...
      expect(res.probedAtAnswer).toBeGreaterThan(MAX_BODY_BYTES);
      expect(res.probedAtAnswer).toBeLessThan(MAX_BODY_BYTES + MARGIN);
      // ... and the client could write little past it before the answer and the close (about
      // 3.7 MiB here: the rest lies in the two sockets' kernel buffers, never read).
      expect(res.writtenBeforeAnswer).toBeLessThan(MAX_BODY_BYTES + KERNEL_BUFFERS);
      expect(res.written).toBeLessThan(MAX_BODY_BYTES + KERNEL_BUFFERS);
    });
  }
});

describe("a declared Content-Length over the cap", () => {
  it("is answered 413 at once, without the body being sent", async () => {
    const res = await send({
      path: "/api/webhooks/pay",
      headers: { "content-type": "application/json", "content-length": String(256 * MiB) },
    });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual(tooLarge);
    expect(res.headers.connection).toBe("close");
    expect(res.probedAtAnswer).toBeLessThan(1024); // the request's head only
  });

  it("is answered 413 for a page action too", async () => {
    const res = await send({
      path: "/signin",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        "content-length": String(MAX_BODY_BYTES + 1),
      },
    });
    expect([res.status, JSON.parse(res.body)]).toEqual([413, tooLarge]);
  });
});

describe("a body under the cap", () => {
  it("reaches the payment webhook whole, its signature checked on the raw bytes", async () => {
    // Nearly 1 MiB, streamed in pieces: an event kind outside the six is 200 and ignored.
    const { payload, header } = signedEvent("customer.created", {
      id: "cus_big",
      object: "customer",
      padding: "p".repeat(MAX_BODY_BYTES - 4096),
    });
    const bytes = Buffer.from(payload);
    expect(bytes.length).toBeLessThan(MAX_BODY_BYTES);
    const pieces = [
      bytes.subarray(0, 300_000),
      bytes.subarray(300_000, 700_000),
      bytes.subarray(700_000),
    ];
    const res = await send({
      path: "/api/webhooks/pay",
      headers: { "content-type": "application/json", "stripe-signature": header },
      chunks: pieces,
    });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({ received: true, result: "ignored" });

    // One byte changed: the signature no longer holds (the route saw the bytes as sent).
    bytes[bytes.length - 2] = "x".charCodeAt(0);
    const altered = await send({
      path: "/api/webhooks/pay",
      headers: {
        "content-type": "application/json",
        "stripe-signature": header,
        "content-length": String(bytes.length),
      },
      body: bytes,
    });
    expect(altered.status).toBe(400);
  });

  it("reaches an ordinary JSON route, chunked or sized", async () => {
    const json = JSON.stringify({ model: "no/such-model", inputTokens: 1, outputTokens: 1 });
    const chunked = await send({
      path: "/api/ai/estimate-cost",
      headers: { "content-type": "application/json" },
      chunks: [Buffer.from(json)],
    });
    expect(chunked.status).toBe(404);
    expect(JSON.parse(chunked.body).error).toMatch(/no\/such-model/);
  });

  it("reaches a page action", async () => {
    const form = new URLSearchParams({ email: "nobody@example.com", password: "wrong password" });
    const res = await send({
      path: "/signin",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      chunks: [Buffer.from(form.toString())],
    });
    // Refused by the action (unknown account): its page, not a 413.
    expect(res.status).toBe(401);
    expect(res.body).toContain("page");
  });
});

describe("an upload route with its own larger cap", () => {
  let path = "";
  let cookie = "";
  beforeAll(async () => {
    const userId = "usr_bodycap";
    cookie = await sessionCookieFor(userId);
    await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
      values ('agt_bodycap', ${userId}, 'cap', 'agt-bodycap', 'custom', 'starter')`;
    path = "/api/agents/agt_bodycap/import";
  });

  it("takes a body past the default cap, up to its own", async () => {
    const res = await send({
      path,
      headers: { cookie, "content-type": "application/octet-stream" },
      chunks: endlessBody(2 * MiB),
    });
    // Read whole (2 MiB, more than any JSON route takes), then found not to be an archive.
    expect(res.status).toBe(400);
    expect(res.written).toBe(2 * MiB);
    expect(JSON.parse(res.body).error).toMatch(/truncated or malformed|Not an agent export/);
  });

  it("closes the connection after an answer given without reading the body", async () => {
    // No credential: 401 before the handler reads a byte; the rest is not read either, though
    // the client would keep the connection.
    const res = await send({
      path,
      headers: { "content-type": "application/octet-stream", connection: "keep-alive" },
      chunks: endlessBody(ENDLESS),
    });
    expect(res.status).toBe(401);
    expect(res.headers.connection).toBe("close");
    expect(res.written).toBeLessThan(KERNEL_BUFFERS);
  });

  it("answers 413 once a body passes its own cap", async () => {
    const res = await send({
      path,
      headers: { cookie, "content-type": "application/octet-stream" },
      chunks: endlessBody(ENDLESS),
    });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toEqual({ error: "Request body exceeds 3 MiB" });
    expect(res.probedAtAnswer).toBeGreaterThan(IMPORT_CAP);
    expect(res.probedAtAnswer).toBeLessThan(IMPORT_CAP + MARGIN);
  });
});
