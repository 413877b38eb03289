import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import path from "node:path";
import { type AppLoadContext, createRequestHandler, type ServerBuild } from "@remix-run/node";
import { withAuditScope } from "../audit.server.ts";
import { clientIp } from "../client-ip.server.ts";
import { env } from "../env.server.ts";
import { type Answer, API_ANSWER, API_ROUTE, bodyCapOf, MAX_BODY_BYTES } from "../http.server.ts";
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
import { cappedBody, declaredLength, hasBody, tooLargeMessage } from "./request-body.server.ts";
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

const CLOSE = { connection: "close" } as const;

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
    const match = isApi ? matchApi(pathname) : undefined;
    const route = match?.metrics ?? (isApi ? HTTP_API_OTHER : HTTP_PAGE);
    // API routes built with the builder send the id themselves (with their other headers).
    if (!match) res.setHeader("x-request-id", requestId);
    // Every body is capped before anything reads it (docs/decisions/0197): the route's own cap
    // (`maxBodyBytes`), the default for every other route and page action.
    const withBody = hasBody(req);
    const cap = !withBody
      ? 0
      : match
        ? bodyCapOf(match.handler[API_ROUTE], req.method)
        : MAX_BODY_BYTES;
    if (withBody && (declaredLength(req) ?? 0) > cap) {
      refuseTooLarge(res, cap); // before a byte of it is read
      return route;
    }
    // An answer given before the body was read to its end closes the connection: the rest is
    // never read (Node would otherwise read and discard it, for as long as the client sends).
    const closing = () => (withBody && !req.complete ? CLOSE : undefined);
    const defaults = () => (closing() ? { ...securityHeaders, ...CLOSE } : securityHeaders);
    if (!isApi && (await serveStatic(root, req, res, pathname, defaults()))) return HTTP_STATIC;
    const canonical = isApi ? undefined : canonicalOriginFor(req.headers.host, env().APP_URL);
    if (canonical) {
      if (req.method === "GET" || req.method === "HEAD") {
        res.writeHead(308, { ...defaults(), location: `${canonical}${url}` });
      } else {
        res.writeHead(421, { ...refusalHeaders, ...closing() });
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
        res.writeHead(403, { ...refusalHeaders, ...closing() });
        res.end(crossSitePage(origin, stylesheet));
        return HTTP_PAGE;
      }
    }

    const origin = `http://${req.headers.host ?? "localhost"}`;
    // A small declared body for a builder route is read here, off the Web-stream path; every
    // other body streams through the cap, which answers 413 itself the moment it passes.
    let body: Buffer | ReadableStream<Uint8Array> | undefined;
    const controller = new AbortController();
    let refused = false;
    if (withBody && req.method !== "GET" && req.method !== "HEAD") {
      try {
        body = match ? await readSmallBody(req, Math.min(cap, MAX_BODY_BYTES)) : undefined;
      } catch {
        res.destroy(); // the client went away mid-body: nobody to answer
        return route;
      }
      body ??= cappedBody(req, cap, () => {
        refused = true;
        refuseTooLarge(res, cap);
        controller.abort(); // the route's work is for nobody now
      });
    }
    const request = toRequest(req, res, origin, body, controller);
    const context: AppLoadContext = { remoteAddress: req.socket.remoteAddress, build };
    let response: Answer;
    try {
      response = match
        ? // Its plain JSON answers come without a Fetch Response (docs/decisions/0150).
          await match.handler[API_ANSWER]({ request, params: match.params, context })
        : // Pages: entries recorded by their actions name the client IP and the session's user.
          await withAuditScope({ ip: clientIp(request, context.remoteAddress) }, () =>
            remix(request, context),
          );
    } catch (error) {
      if (refused) return route; // the route failed on the body cut off: 413 is out already
      throw error;
    }
    if (refused) return route;
    await sendResponse(res, response, req.method === "HEAD", defaults());
    return route;
  }

  /** 413 {error} with the connection closed after it (the rest of the body is never read). */
  function refuseTooLarge(res: ServerResponse, cap: number) {
    if (res.headersSent) {
      res.destroy(); // an answer already under way cannot become a 413: cut it off
      return;
    }
    const text = JSON.stringify({ error: tooLargeMessage(cap) });
    res.writeHead(413, {
      ...securityHeaders,
      "content-type": "application/json; charset=utf-8",
      "cache-control": "no-store",
      "content-length": String(Buffer.byteLength(text)),
      connection: "close",
    });
    res.end(text);
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
