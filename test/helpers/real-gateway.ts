import { createServer, type Server } from "node:http";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import * as modelsRoute from "../../app/routes/api.ai.v1.models.ts";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { sendResponse, toRequest } from "../../app/server/platform/web/node-http.server.ts";
import { provision } from "../../worker/instances/provision.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { configureAi } from "../ai/support.ts";
import type { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import { allowDockerNetworks, cleanupTestObjects, testRun } from "../runtime/docker-support.ts";
import type { RouteModule } from "./api.ts";

// The set-up every file that talks to a real OpenClaw gateway in a container shares (decision
// 0153): the file's own deployment label and bridge network, the Docker runtime, the AI layer's
// OpenAI provider answered by msw, and the platform's HTTP routes (the AI endpoint, and what
// else the file needs) served on the network's gateway address, where containers reach it.
// A file then provisions its gateway through the worker's real provisioning
// (`provisionRealGateway`) and tears everything down with `stopGatewayBench` in its afterAll.

export interface GatewayBench {
  rt: DockerRuntime;
  /** The bridge network's gateway address (the host as containers see it). */
  gatewayIp: string;
  /** `host:port` of `server` as containers reach it. */
  base: string;
  /** The platform's routes over HTTP; RUNTIME_PLATFORM_AI_URL points at its AI endpoint. */
  server: Server;
}

const AI_ROUTES: Record<string, RouteModule> = {
  "/api/ai/v1/chat/completions": completionsRoute as unknown as RouteModule,
  "/api/ai/v1/models": modelsRoute as unknown as RouteModule,
};

export interface GatewayBenchOptions {
  openai: ReturnType<typeof createOpenAiFake>;
  /** Routes beside the AI endpoint, by path prefix (e.g. `/api/agent` for HTTP measurements). */
  routes?: Record<string, RouteModule>;
  /** Called with the server before it listens (e.g. to attach the live agent socket). */
  onServer?: (server: Server) => void;
  /** Called with each answered request's path and status (e.g. to count the AI endpoint's 402s). */
  onResponse?: (path: string, status: number) => void;
}

/** Prepares the file's network, runtime, AI provider and platform routes (once per file). */
export async function startGatewayBench(options: GatewayBenchOptions): Promise<GatewayBench> {
  const rt = new DockerRuntime({ maxCpus: 1 });
  process.env.RUNTIME_DEPLOYMENT = testRun;
  const network = `agent-test-${testRun}`;
  process.env.RUNTIME_NETWORK = network;
  resetEnvCache();
  setRuntime(rt);
  allowDockerNetworks();
  mswServer.use(...options.openai.handlers);
  await configureAi({ OPENAI_API_KEY: "test-key" });
  const { gatewayIp } = await rt.ensureNetwork(network, {
    "agent-platform.deployment": testRun,
  });
  if (!gatewayIp) throw new Error(`network ${network} has no gateway address`);
  const routes = { ...AI_ROUTES, ...options.routes };
  const server = createServer(async (req, res) => {
    const path = new URL(req.url ?? "/", "http://platform.test").pathname;
    const prefix = Object.keys(routes).find((p) => path === p || path.startsWith(`${p}/`));
    const route = prefix ? routes[prefix] : undefined;
    if (!route) {
      res.writeHead(404).end();
      return;
    }
    const request = toRequest(req, res, `http://${req.headers.host}`);
    const handler = req.method === "GET" || req.method === "HEAD" ? route.loader : route.action;
    const response = await handler({
      request,
      params: {},
      context: { remoteAddress: req.socket.remoteAddress },
    });
    options.onResponse?.(path, response.status);
    await sendResponse(res, response, req.method === "HEAD");
  });
  options.onServer?.(server);
  await new Promise<void>((ok) => server.listen(0, gatewayIp, ok));
  const { port } = server.address() as { port: number };
  const base = `${gatewayIp}:${port}`;
  process.env.RUNTIME_PLATFORM_AI_URL = `http://${base}/api/ai/v1`;
  resetEnvCache();
  return { rt, gatewayIp, base, server };
}

/**
 * Boots a real gateway for `userId` through the worker's provisioning (container, health,
 * pairing, platform config) and returns its instance row and how long that took.
 */
export async function provisionRealGateway(
  userId: string,
  options: Parameters<typeof ensureInstanceRecord>[1] = { plan: "solo" },
): Promise<{ instance: InstanceRow; provisionMs: number }> {
  const row = await ensureInstanceRecord(userId, options);
  const t0 = Date.now();
  await provision(row.id);
  const provisionMs = Date.now() - t0;
  return { instance: (await getInstance(row.id)) as InstanceRow, provisionMs };
}

/** Closes the gateway connections and the routes, removes the file's containers and network. */
export async function stopGatewayBench(bench: GatewayBench | undefined): Promise<void> {
  closeGatewayClients();
  setRuntime(undefined);
  if (!bench) return;
  bench.server.close();
  await cleanupTestObjects(bench.rt);
}

/** The user messages the model received (OpenClaw adds context messages of its own). */
export function userTexts(body: Record<string, unknown>): string[] {
  const messages = (body.messages ?? []) as Array<{ role: string; content: unknown }>;
  return messages
    .filter((m) => m.role === "user")
    .map(({ content }) =>
      typeof content === "string"
        ? content
        : Array.isArray(content)
          ? content.map((p) => (p as { text?: string }).text ?? "").join("")
          : "",
    );
}
