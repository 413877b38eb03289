import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import path from "node:path";
import { type AppLoadContext, createRequestHandler, type ServerBuild } from "@remix-run/node";
import { withAuditScope } from "../audit.server.ts";
import { clientIp } from "../client-ip.server.ts";
import { env } from "../env.server.ts";
import { API_ANSWER, MAX_BODY_BYTES } from "../http.server.ts";
import { logger } from "../logger.server.ts";
import { isMetricsPath, serveMetrics } from "../metrics/endpoint.server.ts";
import {
  HTTP_API_OTHER,
  HTTP_METRICS,
  HTTP_PAGE,
  HTTP_STATIC,
  type HttpRouteMetrics,
} from "../metrics/http.server.ts";
import { metricsEnabled } from "../metrics/registry.server.ts";
import { requestIdFor, runWithRequestId } from "../request-context.server.ts";
import { compileApiRoutes } from "./api-dispatch.server.ts";
import { crossSitePage } from "./cross-site-page.server.ts";
import type { Ingress } from "./ingress-proxy.server.ts";
import { canonicalOriginFor, wrongAddressPage } from "./local-address.server.ts";
import { readSmallBody, sendResponse, toRequest } from "./node-http.server.ts";
import { isCrossSite, isUnsafeMethod } from "./same-origin.server.ts";
import { constantSecurityHeaders, STATIC_PAGE_POLICY } from "./security-headers.server.ts";
import { serveStatic } from "./static-files.server.ts";

export interface WebServerOptions {
  build: ServerBuild;
  publicDir: string;
  mode?: string;
  /** Call /api builder routes directly instead of through Remix (default on; off for benchmarks). */
  apiFastPath?: boolean;
  /** Agents' addresses (host and path form), proxied to their gateways before anything else. */
  ingress?: Ingress;
  /** Every other WebSocket upgrade (the live agent socket); without one, upgrades get 404. */
  upgrade?: (req: IncomingMessage, socket: Socket, head: Buffer) => void;
}

/** The app's stylesheet (from the root route's links), for the server's own small pages. */
function stylesheetOf(build: ServerBuild): string | undefined {
  const links = build.routes.root?.module.links?.() ?? [];
  for (const link of links) {
    if ("rel" in link && link.rel === "stylesheet" && typeof link.href === "string") {
      return link.href;
    }
  }
  return undefined;
}

/** The web tier: static files, the /api fast path, and Remix for everything else. */
export function createWebServer({
  build,
  publicDir,
  mode = "production",
  ingress,
  upgrade,
}: WebServerOptions): Server {
  const remix = createRequestHandler(build, mode);
  const matchApi = compileApiRoutes(build);
  const root = path.resolve(publicDir);
  // Built once: the fast path only copies them into each answer's header object.
  const appHost = new URL(env().APP_URL).host;
  const securityHeaders = constantSecurityHeaders(env().APP_URL);
  const stylesheet = stylesheetOf(build);
  const refusalHeaders = {
    ...securityHeaders,
    "content-security-policy": STATIC_PAGE_POLICY,
    "content-type": "text/html; charset=utf-8",
    "cache-control": "no-store",
  };

  // Requests are counted and timed only while /metrics can be read (METRICS_TOKEN set).
  const recordHttp = metricsEnabled();

  /** Answers one request; gives the route template (or class) its metrics are recorded under. */
  async function handle(
    req: IncomingMessage,
    res: ServerResponse,
    requestId: string,
  ): Promise<HttpRouteMetrics> {
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const pathname = q === -1 ? url : url.slice(0, q);
    const isApi = pathname === "/api" || pathname.startsWith("/api/");
    // API routes built with the builder send the id themselves (with their other headers).
    if (!isApi) res.setHeader("x-request-id", requestId);
    if (!isApi && (await serveStatic(root, req, res, pathname, securityHeaders))) {
      return HTTP_STATIC;
    }
    const canonical = isApi ? undefined : canonicalOriginFor(req.headers.host, env().APP_URL);
    if (canonical) {
      if (req.method === "GET" || req.method === "HEAD") {
        res.writeHead(308, { ...securityHeaders, location: `${canonical}${url}` });
      } else {
        res.writeHead(421, refusalHeaders);
        res.write(wrongAddressPage(req.headers.host ?? "", canonical, stylesheet));
      }
      res.end();
      return HTTP_PAGE;
    }
    // A form posted to a page from another site: refused here with a page that says why
    // (Remix's own origin check would throw, and Remix answers that with an empty 500). /api
    // routes decide themselves: only cookie-authenticated calls are refused (403 {error}).
    if (!isApi && isUnsafeMethod(req.method)) {
      const origin = req.headers.origin;
      const crossSite = isCrossSite(
        { origin, host: req.headers.host, secFetchSite: req.headers["sec-fetch-site"] as string },
        appHost,
      );
      if (crossSite) {
        res.writeHead(403, refusalHeaders);
        res.end(crossSitePage(origin, stylesheet));
        return HTTP_PAGE;
      }
    }

    const origin = `http://${req.headers.host ?? "localhost"}`;
    const match = isApi ? matchApi(pathname) : undefined;
    if (isApi && !match) res.setHeader("x-request-id", requestId);
    const route = match?.metrics ?? (isApi ? HTTP_API_OTHER : HTTP_PAGE);
    // Builder routes read whole bodies of at most MAX_BODY_BYTES anyway: read a small one here,
    // off the Web-stream path (larger or unsized bodies stream as before and get their 413).
    let body: Buffer | undefined;
    try {
      body = match ? await readSmallBody(req, MAX_BODY_BYTES) : undefined;
    } catch {
      res.destroy(); // the client went away mid-body: nobody to answer
      return route;
    }
    const request = toRequest(req, res, origin, body);
    const context: AppLoadContext = { remoteAddress: req.socket.remoteAddress, build };
    const response = match
      ? // Its plain JSON answers come without a Fetch Response (docs/decisions/0150).
        await match.handler[API_ANSWER]({ request, params: match.params, context })
      : // Pages: entries recorded by their actions name the client IP and the session's user.
        await withAuditScope({ ip: clientIp(request, context.remoteAddress) }, () =>
          remix(request, context),
        );
    await sendResponse(res, response, req.method === "HEAD", securityHeaders);
    return route;
  }

  /** One request under its id, timed from here until its answer is handed to the socket. */
  async function serve(req: IncomingMessage, res: ServerResponse, requestId: string) {
    const startedAt = performance.now();
    let route = HTTP_PAGE;
    try {
      route = await handle(req, res, requestId);
    } catch (error) {
      logger().error({ err: error, url: req.url }, "request failed outside a route");
      if (!res.headersSent) {
        res.writeHead(500, { ...securityHeaders, "Content-Type": "application/json" });
        res.end(JSON.stringify({ error: "Internal server error" }));
      } else {
        res.destroy();
      }
    }
    if (recordHttp) {
      route.record(req.method, res.statusCode, (performance.now() - startedAt) / 1000);
    }
  }

  const server = createServer((req, res) => {
    if (ingress?.handle(req, res)) return;
    if (isMetricsPath(req.url)) {
      const startedAt = performance.now();
      serveMetrics(req, res, securityHeaders).then(
        () => {
          if (!recordHttp) return;
          HTTP_METRICS.record(req.method, res.statusCode, (performance.now() - startedAt) / 1000);
        },
        (error: unknown) => {
          logger().error({ err: error }, "metrics answer failed");
          res.destroy();
        },
      );
      return;
    }
    const requestId = requestIdFor(req.headers["x-request-id"], req.socket.remoteAddress);
    void runWithRequestId(requestId, serve, req, res, requestId);
  });
  // WebSocket endpoints (the ingress, the live agent socket) are handed in by the entry, which
  // knows the areas; one listener, so that exactly one of them answers each upgrade.
  if (ingress || upgrade) {
    server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
      if (ingress?.upgrade(req, socket, head)) return;
      if (upgrade) upgrade(req, socket, head);
      else socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n");
    });
  }
  return server;
}
