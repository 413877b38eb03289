import { once } from "node:events";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { ServerBuild } from "@remix-run/node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { apiRoute, endpoint } from "../../app/server/api.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { logger } from "../../app/server/platform/logger.server.ts";
import { createWebServer } from "../../app/server/platform/web/web-server.server.ts";
import { startMetricsServer } from "../../worker/metrics-server.ts";

// GET /metrics (issue 51): the Prometheus text on the web's port and a worker's, only for the
// bearer of METRICS_TOKEN; requests counted by route template; one request id per request.

const TOKEN = "metrics-token-0123456789";

const seen: Array<{ requestId: string; logged: unknown }> = [];
const things = apiRoute({
  GET: endpoint({
    summary: "a thing",
    auth: "none",
    params: z.object({ id: z.string() }),
    handler: ({ params, requestId }) => {
      seen.push({ requestId, logged: logger().bindings().requestId });
      return { id: params.id };
    },
  }),
});

const build = {
  routes: {
    root: { id: "root", path: "", module: {} },
    things: { id: "things", parentId: "root", path: "api/things/:id", module: things },
  },
} as unknown as ServerBuild;

async function listen(server: Server): Promise<string> {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function close(server: Server | undefined) {
  if (!server) return;
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
}

describe("GET /metrics without METRICS_TOKEN", () => {
  let web: Server;
  let base = "";
  beforeAll(async () => {
    delete process.env.METRICS_TOKEN;
    resetEnvCache();
    web = createWebServer({ build, publicDir: "/nonexistent" });
    base = await listen(web);
  });
  afterAll(() => close(web));

  it("does not exist (404), whatever the credential", async () => {
    const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: "Not found" });
  });
});

describe("GET /metrics with METRICS_TOKEN", () => {
  let web: Server;
  let base = "";
  const scrape = (authorization?: string) =>
    fetch(`${base}/metrics`, authorization ? { headers: { authorization } } : {});

  beforeAll(async () => {
    process.env.METRICS_TOKEN = TOKEN;
    resetEnvCache();
    web = createWebServer({ build, publicDir: "/nonexistent" });
    base = await listen(web);
  });
  afterAll(async () => {
    await close(web);
    delete process.env.METRICS_TOKEN;
    delete process.env.TRUSTED_PROXIES;
    resetEnvCache();
  });

  it("answers 401 {error} without the token or with a wrong one", async () => {
    for (const authorization of [undefined, `Bearer ${TOKEN}x`, "Bearer ", TOKEN]) {
      const res = await scrape(authorization);
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe("Bearer");
      expect(await res.json()).toEqual({ error: "Missing or invalid metrics token" });
    }
  });

  it("answers the Prometheus text format with the token", async () => {
    const res = await scrape(`Bearer ${TOKEN}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(await res.text()).toContain("# TYPE platform_http_requests_total counter");
  });

  it("counts requests by route template and status class, never by concrete path", async () => {
    const res = await fetch(`${base}/api/things/usr_secret_1`);
    expect(res.status).toBe(200);
    await fetch(`${base}/api/things/usr_secret_2`);
    const text = await (await scrape(`Bearer ${TOKEN}`)).text();
    expect(text).toContain(
      'platform_http_requests_total{route="/api/things/:id",method="GET",status_class="2xx"} 2',
    );
    expect(text).toMatch(
      /platform_http_request_duration_seconds_count\{route="\/api\/things\/:id",method="GET",status_class="2xx"\} 2/,
    );
    expect(text).not.toContain("usr_secret");
  });

  it("gives every request an id, in its answer and in its log lines", async () => {
    const res = await fetch(`${base}/api/things/a`, { headers: { "x-request-id": "mine-1" } });
    const id = res.headers.get("x-request-id");
    // The peer (loopback) is no trusted proxy: its own id is not taken.
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(seen.at(-1)).toEqual({ requestId: id, logged: id });
    const page = await fetch(`${base}/somewhere`);
    expect(page.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(page.headers.get("x-request-id")).not.toBe(id);
  });

  it("takes X-Request-Id from a trusted proxy, if it is well-formed", async () => {
    process.env.TRUSTED_PROXIES = "127.0.0.1";
    resetEnvCache();
    const res = await fetch(`${base}/api/things/a`, { headers: { "x-request-id": "edge-42" } });
    expect(res.headers.get("x-request-id")).toBe("edge-42");
    expect(seen.at(-1)).toEqual({ requestId: "edge-42", logged: "edge-42" });
    const bad = await fetch(`${base}/api/things/a`, { headers: { "x-request-id": "<x>" } });
    expect(bad.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe("a worker's /metrics listener", () => {
  afterAll(() => {
    delete process.env.METRICS_TOKEN;
    delete process.env.WORKER_METRICS_PORT;
    resetEnvCache();
  });

  it("is off unless WORKER_METRICS_PORT is set", async () => {
    delete process.env.WORKER_METRICS_PORT;
    resetEnvCache();
    expect(await startMetricsServer()).toBeUndefined();
  });

  it("listens on loopback and answers like the web", async () => {
    process.env.WORKER_METRICS_PORT = "0";
    process.env.METRICS_TOKEN = TOKEN;
    resetEnvCache();
    const server = await startMetricsServer();
    try {
      const address = server?.address() as AddressInfo;
      expect(address.address).toBe("127.0.0.1");
      const base = `http://127.0.0.1:${address.port}`;
      expect((await fetch(`${base}/metrics`)).status).toBe(401);
      const ok = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(ok.status).toBe(200);
      expect(await ok.text()).toContain("platform_http_requests_total");
      expect((await fetch(`${base}/other`)).status).toBe(404);
    } finally {
      await close(server);
    }
  });
});
