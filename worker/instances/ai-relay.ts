import { createConnection, createServer, type Server } from "node:net";
import { env } from "../../app/server/platform/env.server.ts";
import { logger } from "../../app/server/platform/logger.server.ts";

// Gateways reach the platform's AI endpoint at their network's gateway address. The web listens
// on loopback by default (`npm start` on a laptop should not face the LAN), where no container
// can reach it. So, outside production and when nothing else says where the web is, the worker
// relays that address's port to the web's loopback one: a plain TCP pipe on the bridge only.

const relays = new Map<string, Server>();

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

/**
 * Listens on listenHost:port and pipes every connection to targetHost:port. Resolves once it
 * listens; an address already served (another worker's relay, or the web itself) is fine.
 */
export function startRelay(listenHost: string, targetHost: string, port: number): Promise<void> {
  const key = `${listenHost}:${port}`;
  if (relays.has(key)) return Promise.resolve();
  const server = createServer((inbound) => {
    const outbound = createConnection({ host: targetHost, port });
    inbound.pipe(outbound).pipe(inbound);
    inbound.on("error", () => outbound.destroy());
    outbound.on("error", () => inbound.destroy());
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
        "relaying the gateways' network to the web on loopback",
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
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
}
