import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import path from "node:path";
import { type AppLoadContext, createRequestHandler, type ServerBuild } from "@remix-run/node";
import { attachLiveSocket } from "../agents/live-socket.server.ts";
import { compileApiRoutes } from "./api-dispatch.server.ts";
import { withAuditScope } from "./audit.server.ts";
import { clientIp } from "./client-ip.server.ts";
import { MAX_BODY_BYTES } from "./http.server.ts";
import { logger } from "./logger.server.ts";
import { readSmallBody, sendResponse, toRequest } from "./node-http.server.ts";
import { serveStatic } from "./static-files.server.ts";

export interface WebServerOptions {
  build: ServerBuild;
  publicDir: string;
  mode?: string;
  /** Call /api builder routes directly instead of through Remix (default on; off for benchmarks). */
  apiFastPath?: boolean;
}

/** The web tier: static files, the /api fast path, and Remix for everything else. */
export function createWebServer({
  build,
  publicDir,
  mode = "production",
}: WebServerOptions): Server {
  const remix = createRequestHandler(build, mode);
  const matchApi = compileApiRoutes(build);
  const root = path.resolve(publicDir);

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const url = req.url ?? "/";
    const q = url.indexOf("?");
    const pathname = q === -1 ? url : url.slice(0, q);
    const isApi = pathname === "/api" || pathname.startsWith("/api/");
    if (!isApi && (await serveStatic(root, req, res, pathname))) return;

    const origin = `http://${req.headers.host ?? "localhost"}`;
    const match = isApi ? matchApi(pathname) : undefined;
    // Builder routes read whole bodies of at most MAX_BODY_BYTES anyway: read a small one here,
    // off the Web-stream path (larger or unsized bodies stream as before and get their 413).
    let body: Buffer | undefined;
    try {
      body = match ? await readSmallBody(req, MAX_BODY_BYTES) : undefined;
    } catch {
      res.destroy(); // the client went away mid-body: nobody to answer
      return;
    }
    const request = toRequest(req, res, origin, body);
    const context: AppLoadContext = { remoteAddress: req.socket.remoteAddress, build };
    const response = match
      ? await match.handler({ request, params: match.params, context })
      : // Pages: entries recorded by their actions name the client IP and the session's user.
        await withAuditScope({ ip: clientIp(request, context.remoteAddress) }, () =>
          remix(request, context),
        );
    await sendResponse(res, response, req.method === "HEAD");
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      logger().error({ err: error, url: req.url }, "request failed outside a route");
      if (!res.headersSent) {
        res.writeHead(500, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ error: "Internal server error" }));
      } else {
        res.destroy();
      }
    });
  });
  // The live agent socket (ws://<host>/agent/<user_id>) shares the web server's port.
  attachLiveSocket(server);
  return server;
}
