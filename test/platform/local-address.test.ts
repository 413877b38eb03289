import { once } from "node:events";
import type { AddressInfo } from "node:net";
import type { ServerBuild } from "@remix-run/node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as healthRoute from "../../app/routes/api.health.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import {
  canonicalOriginFor,
  isLocalName,
} from "../../app/server/platform/web/local-address.server.ts";
import { createWebServer } from "../../app/server/platform/web/web-server.server.ts";

// One local address (issue 25): page requests on another local name for this server go to
// APP_URL's origin (GET redirected, a form post told where to go); /api answers on any name.

describe("canonicalOriginFor", () => {
  it("sends another local name on the same port to APP_URL's origin", () => {
    expect(canonicalOriginFor("127.0.0.1:3000", "http://localhost:3000")).toBe(
      "http://localhost:3000",
    );
    expect(canonicalOriginFor("[::1]:3000", "http://localhost:3000/")).toBe(
      "http://localhost:3000",
    );
    expect(canonicalOriginFor("localhost:8080", "http://127.0.0.1:8080")).toBe(
      "http://127.0.0.1:8080",
    );
  });

  it("leaves the right address, public APP_URLs, public hosts and other ports alone", () => {
    expect(canonicalOriginFor("localhost:3000", "http://localhost:3000")).toBeUndefined();
    expect(canonicalOriginFor("LOCALHOST:3000", "http://localhost:3000")).toBeUndefined();
    expect(canonicalOriginFor("127.0.0.1:3000", "https://app.example.com")).toBeUndefined();
    expect(canonicalOriginFor("app.example.com", "http://localhost:3000")).toBeUndefined();
    expect(canonicalOriginFor("127.0.0.1:4000", "http://localhost:3000")).toBeUndefined();
    expect(canonicalOriginFor(undefined, "http://localhost:3000")).toBeUndefined();
    expect(canonicalOriginFor("bad host/", "http://localhost:3000")).toBeUndefined();
  });

  it("knows the loopback names", () => {
    for (const name of ["localhost", "app.localhost", "127.0.0.1", "127.1.2.3", "[::1]"]) {
      expect(isLocalName(name)).toBe(true);
    }
    for (const name of ["example.com", "10.0.0.1", "192.168.1.1", "localhost.example.com"]) {
      expect(isLocalName(name)).toBe(false);
    }
  });
});

describe("the web server on another local name", () => {
  const build = {
    routes: {
      root: { id: "root", path: "", module: {} },
      health: { id: "health", parentId: "root", path: "api/health", module: healthRoute },
    },
  } as unknown as ServerBuild;
  const web = createWebServer({ build, publicDir: "/nonexistent" });
  let port = 0;

  beforeAll(async () => {
    web.listen(0, "127.0.0.1");
    await once(web, "listening");
    port = (web.address() as AddressInfo).port;
    process.env.APP_URL = `http://localhost:${port}`;
    resetEnvCache();
  });
  afterAll(async () => {
    delete process.env.APP_URL;
    resetEnvCache();
    web.closeAllConnections();
    await new Promise((r) => web.close(r));
  });

  it("redirects a page GET to APP_URL with its path and query", async () => {
    const res = await fetch(`http://127.0.0.1:${port}/signin?next=%2Fagents`, {
      redirect: "manual",
    });
    expect(res.status).toBe(308);
    expect(res.headers.get("location")).toBe(`http://localhost:${port}/signin?next=%2Fagents`);
  });

  it("answers a form post with a page naming the address to use", async () => {
    const res = await fetch(`http://127.0.0.1:${port}/signin`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "email=a%40b.c",
      redirect: "manual",
    });
    expect(res.status).toBe(421);
    expect(res.headers.get("content-type")).toContain("text/html");
    const html = await res.text();
    expect(html).toContain(`this server's address is <strong>http://localhost:${port}</strong>`);
    expect(html).toContain(`href="http://localhost:${port}"`);
  });

  it("does not redirect /api", async () => {
    const res = await fetch(`http://127.0.0.1:${port}/api/health`, { redirect: "manual" });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "ok" });
  });
});
