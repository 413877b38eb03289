import {
  type Agent,
  createServer,
  Agent as HttpAgent,
  type IncomingMessage,
  request,
  type Server,
  type ServerResponse,
} from "node:http";
import { authenticateInstanceToken } from "../../app/server/ai/instance-tokens.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { logger } from "../../app/server/platform/logger.server.ts";

// Gateways reach the platform's AI endpoint at the shared network's gateway address. The web
// listens on loopback by default (`npm start` on a laptop should not face the LAN), where no
// container can reach it. So, outside production and when nothing else says where the web is,
// the worker relays that address's port to the web's loopback one. Every tenant's container can
// reach that address (it is the host's), so the relay serves the model endpoint and nothing
// else of the web, to callers with a live instance token only (decision 0195).

const relays = new Map<string, Server>();

/** The paths a gateway calls: the OpenAI-compatible endpoint, nothing else of the web. */
const AI_PREFIX = "/api/ai/v1/";
/** Request headers not passed on (hop-by-hop, RFC 9110 7.6.1). */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
]);

export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || host.startsWith("127.");
}

/** Whether gateways need the relay to reach the web (see above). */
export function relayNeeded(gatewayIp: string | undefined): gatewayIp is string {
  const config = env();
  return (
    config.NODE_ENV !== "production" &&
    !config.RUNTIME_PLATFORM_AI_URL &&
    isLoopback(config.HOST) &&
    gatewayIp !== undefined &&
    !isLoopback(gatewayIp)
  );
}

function refuse(res: ServerResponse, status: number, error: string) {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ error }));
}

/**
 * The path and query to pass on, as the web will read them (dot segments, encoded or not,
 * resolved), or a refusal: outside the model endpoint, or without a live instance token.
 */
async function check(
  req: IncomingMessage,
): Promise<{ path: string } | { refused: [number, string] }> {
  let url: URL;
  try {
    url = new URL(req.url ?? "", "http://relay.invalid");
  } catch {
    return { refused: [400, "Malformed request target"] };
  }
  if (url.host !== "relay.invalid" || !url.pathname.startsWith(AI_PREFIX)) {
    return { refused: [404, "Not found"] };
  }
  const token = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "")?.[1];
  if (!token) return { refused: [401, "Missing instance token"] };
  if (!(await authenticateInstanceToken(token)))
    return { refused: [401, "Invalid instance token"] };
  return { path: `${url.pathname}${url.search}` };
}

function forward(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  target: { host: string; port: number; agent: Agent },
) {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
  }
  const upstream = request(
    {
      host: target.host,
      port: target.port,
      agent: target.agent,
      method: req.method,
      path,
      headers,
    },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on("error", () => {
    if (!res.headersSent) refuse(res, 502, "The platform's AI endpoint did not answer");
    else res.destroy();
  });
  res.on("close", () => upstream.destroy());
  req.pipe(upstream);
}

/**
 * Listens on listenHost:port and passes the gateways' model calls to targetHost:port (see
 * above). Resolves once it listens; an address already served (another worker's relay, or the
 * web itself) is fine.
 */
export function startRelay(listenHost: string, targetHost: string, port: number): Promise<void> {
  const key = `${listenHost}:${port}`;
  if (relays.has(key)) return Promise.resolve();
  const agent = new HttpAgent({ keepAlive: true });
  const server = createServer((req, res) => {
    check(req)
      .then((checked) => {
        if ("path" in checked) {
          forward(req, res, checked.path, { host: targetHost, port, agent });
          return;
        }
        req.resume(); // the body is drained, never read into memory
        refuse(res, ...checked.refused);
      })
      .catch((error: unknown) => {
        logger().warn({ err: error }, "AI endpoint relay could not check a token");
        refuse(res, 503, "The platform's AI endpoint is unavailable");
      });
  });
  return new Promise((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "EADDRINUSE") resolve();
      else reject(error);
    });
    server.listen(port, listenHost, () => {
      relays.set(key, server);
      server.unref();
      logger().info(
        { listen: key, target: `${targetHost}:${port}` },
        "relaying the gateways' model calls to the web on loopback",
      );
      resolve();
    });
  });
}

/** Makes the web reachable from the gateways' network when it listens on loopback only. */
export async function ensureAiRelay(gatewayIp: string | undefined): Promise<void> {
  if (!relayNeeded(gatewayIp)) return;
  const { HOST, PORT } = env();
  await startRelay(gatewayIp, HOST === "localhost" ? "127.0.0.1" : HOST, PORT).catch(
    (error: unknown) => logger().warn({ err: error, gatewayIp }, "AI endpoint relay not started"),
  );
}

/** Closes every relay (tests, shutdown). */
export async function stopRelays(): Promise<void> {
  const servers = [...relays.values()];
  relays.clear();
  await Promise.all(
    servers.map(
      (s) =>
        new Promise<void>((resolve) => {
          s.closeAllConnections();
          s.close(() => resolve());
        }),
    ),
  );
}
