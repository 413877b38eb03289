import { createServer, type Server } from "node:http";
import { Readable } from "node:stream";
import * as aiChatRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import * as aiModelsRoute from "../../app/routes/api.ai.v1.models.ts";
import type { RouteModule } from "./api.ts";

/**
 * The platform's AI endpoint over HTTP for gateway containers (the real route modules, not a
 * stand-in), on every interface: a container reaches it at its network's gateway address.
 */
export function serveAiEndpoint(): Promise<Server> {
  const routes: Record<string, RouteModule> = {
    "/api/ai/v1/chat/completions": aiChatRoute as unknown as RouteModule,
    "/api/ai/v1/models": aiModelsRoute as unknown as RouteModule,
  };
  const server = createServer(async (req, res) => {
    try {
      const url = new URL(req.url ?? "/", "http://platform.test");
      const route = routes[url.pathname];
      if (!route) {
        res.writeHead(404).end();
        return;
      }
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const request = new Request(url, {
        method: req.method,
        headers: req.headers as Record<string, string>,
        body: chunks.length ? Buffer.concat(chunks) : undefined,
      });
      const fn = req.method === "GET" ? route.loader : route.action;
      const response = await fn({
        request,
        params: {},
        context: { remoteAddress: req.socket.remoteAddress },
      });
      res.writeHead(response.status, Object.fromEntries(response.headers));
      if (response.body) Readable.fromWeb(response.body as never).pipe(res);
      else res.end();
    } catch (error) {
      res.writeHead(500).end(String(error));
    }
  });
  return new Promise((resolve) => server.listen(0, "0.0.0.0", () => resolve(server)));
}
