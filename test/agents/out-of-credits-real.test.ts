import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, expect, it } from "vitest";
import * as agentRoute from "../../app/routes/api.agent.ts";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { sendResponse, toRequest } from "../../app/server/platform/web/node-http.server.ts";
import { connectPaired } from "../../worker/instances/pairing.ts";
import { provision } from "../../worker/instances/provision.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { configureAi, giveCredits } from "../ai/support.ts";
import { call } from "../helpers/api.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import {
  allowDockerNetworks,
  cleanupTestObjects,
  describeDocker,
  testRun,
} from "../runtime/docker-support.ts";

// An agent whose owner has no credits, against the real OpenClaw gateway (decision 0155): the
// platform's AI endpoint answers 402 in words OpenClaw treats as a passing usage limit, so the
// chat shows "out of credits" and the provider is not disabled; credits granted right after
// make the very next chat answer.

const rt = new DockerRuntime({ maxCpus: 1 });
const openai = createOpenAiFake();
const REPLY = "Paid and answering.";
const USER = "usr_broke_owner";
let server: Server;
let instance: InstanceRow;
const statuses: number[] = [];

const chat = async (message: string) =>
  call(agentRoute, "/api/agent", {
    method: "POST",
    body: { message },
    headers: { cookie: await sessionCookieFor(USER) },
  });

describeDocker("an agent whose owner has no credits (real gateway)", () => {
  beforeAll(async () => {
    process.env.RUNTIME_DEPLOYMENT = testRun;
    process.env.RUNTIME_NETWORK = `agent-test-${testRun}`;
    // A shared, loaded machine: a gateway may take minutes to answer its first /healthz.
    process.env.GATEWAY_HEALTH_TIMEOUT_MS = "480000";
    resetEnvCache();
    setRuntime(rt);
    allowDockerNetworks();
    mswServer.use(...openai.handlers);
    openai.state.reply = REPLY;
    await configureAi({ OPENAI_API_KEY: "test-key" });
    const { gatewayIp } = await rt.ensureNetwork(process.env.RUNTIME_NETWORK, {
      "agent-platform.deployment": testRun,
    });
    server = createServer(async (req, res) => {
      const request = toRequest(req, res, `http://${req.headers.host}`);
      const response = await completionsRoute.action({ request, params: {}, context: {} });
      statuses.push(response.status);
      await sendResponse(res, response, false);
    });
    await new Promise<void>((ok) => server.listen(0, gatewayIp, ok));
    const { port } = server.address() as { port: number };
    process.env.RUNTIME_PLATFORM_AI_URL = `http://${gatewayIp}:${port}/api/ai/v1`;
    resetEnvCache();

    await sessionCookieFor(USER);
    await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
      values ('agt_brokeowner00000000', ${USER}, 'Broke', 'main', 'openai/gpt-4o-mini', 'starter')`;
    const row = await ensureInstanceRecord(USER, { plan: "solo" });
    await provision(row.id);
    instance = (await getInstance(row.id)) as InstanceRow;
    statuses.length = 0; // the chats below are what counts
  }, 600_000);

  afterAll(async () => {
    closeGatewayClients();
    setRuntime(undefined);
    server?.close();
    await cleanupTestObjects(rt);
  });

  it("says out of credits in the chat, and answers at once when credits arrive", async () => {
    // Listening on the gateway as the platform does: what its chat channels would be sent.
    const { client } = await connectPaired(instance, instance.gateway_address as string);
    const errors: string[] = [];
    client.onEvent((event, payload) => {
      const p = payload as { state?: string; errorMessage?: string };
      if (event === "chat" && p.state === "error" && p.errorMessage) errors.push(p.errorMessage);
    });
    try {
      const refused = await chat("Hello?");
      expect(refused.status, refused.text).toBe(402);
      expect(refused.json.error).toMatch(/^Out of credits: .*Add credits on the Billing page/);
      // A run OpenClaw ended with a transient error first (state-database contention) is sent
      // again by the platform: the refusal is the error of the run that reached the endpoint.
      const refusal = () => errors.find((e) => e.includes("Out of credits"));
      await expect.poll(refusal).toMatch(/^⚠️ "?Out of credits: the usage limit/);
      // No retry loop (OpenClaw may make one follow-up call after a failed turn).
      expect(statuses.length).toBeGreaterThan(0);
      expect(statuses.length).toBeLessThanOrEqual(2);
      expect(statuses.every((s) => s === 402)).toBe(true);
    } finally {
      client.close();
    }
    // The provider was never asked for a completion: nothing to pay it with. (Its model list
    // may be read: the catalog refreshes it.)
    const completions = () => openai.state.calls.filter((c) => c.url.endsWith("/chat/completions"));
    expect(completions()).toHaveLength(0);

    await giveCredits(USER, 5_000_000);
    const refusedCalls = statuses.length;
    const t = Date.now();
    const answered = await chat("Hello again");
    expect(answered.status, answered.text).toBe(200);
    expect(answered.json.reply).toBe(REPLY);
    // "At once": the gateway went straight to the endpoint (a disabled provider would have been
    // refused inside the gateway without a call), and nothing was refused after the grant.
    expect(statuses.slice(refusedCalls)).toContain(200);
    expect(statuses.slice(refusedCalls)).not.toContain(402);
    process.stdout.write(`out-of-credits: answered ${Date.now() - t} ms after the grant\n`);
    await flushMetering();
    const [usage] = await db()`select count(*)::int as n from ai_usage where user_id = ${USER}`;
    expect(usage?.n).toBeGreaterThan(0);
  }, 240_000);
});
