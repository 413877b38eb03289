import { createServer, type Server } from "node:http";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { flushRecords } from "../../app/server/agents/talk.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { sendResponse, toRequest } from "../../app/server/platform/web/node-http.server.ts";
import { provision } from "../../worker/instances/provision.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { configureAi, giveCredits } from "../ai/support.ts";
import type { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import { allowDockerNetworks, cleanupTestObjects, testRun } from "../runtime/docker-support.ts";
import { ensureUser } from "./users.ts";

// One real OpenClaw gateway for a test file: the container on a test network, its model
// provider the platform's AI endpoint (/api/ai/v1, served on the network's gateway IP) with the
// AI layer's OpenAI provider answered by msw, one user with credits and one agent, provisioned
// once. Call from beforeAll (give it minutes: on a loaded shared machine the gateway's first
// /healthz has taken over 3 minutes, so the health wait here is 8) and stop it in afterAll.

/** The beforeAll limit a file starting a real gateway should give itself. */
export const REAL_GATEWAY_START_MS = 600_000;

export interface RealGateway {
  rt: DockerRuntime;
  instance: InstanceRow;
  provisionMs: number;
  stop(): Promise<void>;
}

export async function startRealGateway(opts: {
  openai: ReturnType<typeof createOpenAiFake>;
  userId: string;
  agentId: string;
  agentName: string;
  credits?: number;
}): Promise<RealGateway> {
  const rt = new DockerRuntime({ maxCpus: 1 });
  process.env.RUNTIME_DEPLOYMENT = testRun;
  process.env.RUNTIME_NETWORK = `agent-test-${testRun}`;
  process.env.GATEWAY_HEALTH_TIMEOUT_MS ??= "480000";
  resetEnvCache();
  setRuntime(rt);
  allowDockerNetworks();
  mswServer.use(...opts.openai.handlers);
  await configureAi({ OPENAI_API_KEY: "test-key" });
  const { gatewayIp } = await rt.ensureNetwork(process.env.RUNTIME_NETWORK, {
    "agent-platform.deployment": testRun,
  });
  const server: Server = createServer(async (req, res) => {
    const request = toRequest(req, res, `http://${req.headers.host}`);
    const handler = req.method === "GET" ? completionsRoute.loader : completionsRoute.action;
    await sendResponse(res, await handler({ request, params: {}, context: {} }), false);
  });
  await new Promise<void>((ok) => server.listen(0, gatewayIp, ok));
  const { port } = server.address() as { port: number };
  process.env.RUNTIME_PLATFORM_AI_URL = `http://${gatewayIp}:${port}/api/ai/v1`;
  resetEnvCache();
  await ensureUser(opts.userId);
  await giveCredits(opts.userId, opts.credits ?? 5_000_000);
  await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
    values (${opts.agentId}, ${opts.userId}, ${opts.agentName}, 'main', 'openai/gpt-4o-mini', 'starter')`;
  const row = await ensureInstanceRecord(opts.userId, { plan: "solo" });
  const t0 = Date.now();
  await provision(row.id);
  const provisionMs = Date.now() - t0;
  const instance = (await getInstance(row.id)) as InstanceRow;
  return {
    rt,
    instance,
    provisionMs,
    async stop() {
      await flushRecords();
      closeGatewayClients();
      setRuntime(undefined);
      server.close();
      await cleanupTestObjects(rt);
    },
  };
}

// What the model saw: the platform's skill use writes "User request:" into the turn.

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

/** The newest user request of the turn (earlier turns of the session come before it). */
export const latestRequest = (body: Record<string, unknown>) =>
  userTexts(body).findLast((t) => t.includes("User request:")) ?? "";
