import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import * as configRoute from "../../app/routes/api.agents.$id.config.ts";
import * as logsRoute from "../../app/routes/api.agents.$id.logs.ts";
import * as messagesRoute from "../../app/routes/api.agents.$id.messages.ts";
import * as statsRoute from "../../app/routes/api.agents.$id.stats.ts";
import * as detailRoute from "../../app/routes/api.agents.$id.ts";
import * as provisionRoute from "../../app/routes/api.agents.provision.ts";
import { getInstanceByUser, type InstanceRow } from "../../app/server/agents/instances.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { connectPaired } from "../../worker/instances/pairing.ts";
import { ChatRecorder } from "../../worker/instances/recorder.ts";
import { sampleAll } from "../../worker/instances/sampler.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { configureAi, giveCredits } from "../ai/support.ts";
import { serveAiEndpoint } from "../helpers/ai-endpoint.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import {
  allowDockerNetworks,
  cleanupTestObjects,
  describeDocker,
  GATEWAY_IMAGE,
  testRun,
  waitFor,
} from "../runtime/docker-support.ts";
import { agentUser, asUser } from "./support.ts";

// The agents API against the real OpenClaw gateway: provisioning through the route, the worker
// (in process) and Docker; the agents in the gateway's config (config.get); gatewayVersion as
// the running gateway reports it; a configuration change reaching the gateway; live stats from
// the sampler; real log entries; and a chat turn recorded by the worker's recorder. The
// gateway's model provider is the platform's own AI endpoint, served here by the real route
// modules over HTTP, with OpenAI answered by its msw fake. One instance for the whole file.

const rt = new DockerRuntime({ maxCpus: 1 });
const openai = createOpenAiFake();
let bridge: Server;
let recorder: ChatRecorder | undefined;
let user: { id: string; cookie: string };
let main: { id: string; model: string };
const timings: Record<string, number> = {};

const onAgent = (id: string, module: unknown, sub = "", opts = {}) =>
  asUser(user, module, `/api/agents/${id}${sub}`, { ...opts, params: { id } });

async function gatewayConfig() {
  const row = (await getInstanceByUser(user.id)) as InstanceRow;
  const { client } = await connectPaired(row, row.gateway_address as string);
  try {
    return (
      await client.request<{
        config: {
          gateway?: { bind?: string; auth?: { mode?: string } };
          agents?: { ownership?: string; entries?: Record<string, Record<string, unknown>> };
        };
      }>("config.get")
    ).config;
  } finally {
    client.close();
  }
}

describeDocker("agents API with the real gateway", () => {
  beforeAll(async () => {
    process.env.RUNTIME_DEPLOYMENT = testRun;
    process.env.RUNTIME_NETWORK = `agent-test-${testRun}`;
    process.env.AGENT_CONFIG_APPLY_WAIT_MS = "60000";
    mswServer.use(...openai.handlers);
    await configureAi({ OPENAI_API_KEY: "test-key" });
    bridge = await serveAiEndpoint();
    // platformAiBaseUrl(): http://<network gateway IP>:<PORT>/api/ai/v1
    process.env.PORT = String((bridge.address() as AddressInfo).port);
    resetEnvCache();
    setRuntime(rt);
    allowDockerNetworks();
    await startWorker();
    user = await agentUser("collective");
    await giveCredits(user.id, 5_000_000);
    const t0 = Date.now();
    const res = await asUser(user, provisionRoute, "/api/agents/provision", {
      method: "POST",
      body: { name: "Main agent", model: "openai/gpt-4o-mini" },
    });
    expect(res.status).toBe(201);
    main = res.json.agent;
    timings.provisionRequestMs = Date.now() - t0;
    // Provisioning (cold start, pairing) and the agents' sync run in the worker.
    await waitFor(
      async () => {
        const [row] = await db()<{ applied_revision: number; apply_error: string | null }[]>`
          select applied_revision, apply_error from agents where id = ${main.id}`;
        if (row?.apply_error) throw new Error(`apply failed: ${row.apply_error}`);
        return (row?.applied_revision ?? 0) >= 1;
      },
      { timeoutMs: 300_000, intervalMs: 500, what: "the agent in the gateway's config" },
    );
    timings.provisionToAppliedMs = Date.now() - t0;
  }, 360_000);

  afterAll(async () => {
    recorder?.stop();
    closeGatewayClients();
    await stopWorker(5_000);
    bridge?.close();
    setRuntime(undefined);
    await cleanupTestObjects(rt);
    delete process.env.AGENT_CONFIG_APPLY_WAIT_MS;
    process.stdout.write(`agents gateway timings ${JSON.stringify(timings)}\n`);
  });

  it("writes the agents into the gateway's config and reports its version", async () => {
    let config = await gatewayConfig();
    expect(config.agents?.entries?.main).toMatchObject({
      name: "Main agent",
      model: "platform/openai/gpt-4o-mini",
    });
    const second = await asUser(user, provisionRoute, "/api/agents/provision", {
      method: "POST",
      body: { name: "Second", model: "custom", config: { thinkingDefault: "low" } },
    });
    expect(second.status).toBe(201);
    const [row] = await db()<{ gateway_agent_id: string }[]>`
      select gateway_agent_id from agents where id = ${second.json.agent.id}`;
    await waitFor(async () => (await gatewayConfig()).agents?.entries?.[row!.gateway_agent_id], {
      timeoutMs: 60_000,
      intervalMs: 500,
      what: "the second agent in the config",
    });
    config = await gatewayConfig();
    expect(config.agents?.ownership).toBe("explicit");
    // The agent names itself in its model calls (decision 0225).
    expect(config.agents?.entries?.[row!.gateway_agent_id]).toEqual({
      name: "Second",
      thinkingDefault: "low",
      params: { extra_body: { platform_agent: second.json.agent.id } },
    });
    // The gateway accepts the id: it lists the agent.
    const instance = (await getInstanceByUser(user.id)) as InstanceRow;
    const { client } = await connectPaired(instance, instance.gateway_address as string);
    try {
      const list = await client.request<{ agents?: Array<{ id: string }> }>("agents.list", {});
      expect(list.agents?.map((a) => a.id)).toEqual(
        expect.arrayContaining(["main", row!.gateway_agent_id]),
      );
    } finally {
      client.close();
    }

    const detail = await onAgent(main.id, detailRoute);
    expect(detail.json.agent).toMatchObject({ status: "running", verified: false });
    const tag = GATEWAY_IMAGE.split(":").pop() as string;
    expect(detail.json.agent.gatewayVersion).toContain(tag);
  }, 120_000);

  it("applies a configuration change to the running gateway, allow-listed keys only", async () => {
    const t0 = Date.now();
    const put = await onAgent(main.id, configRoute, "/config", {
      method: "PUT",
      body: {
        identity: { name: "Sam", emoji: "🦥" },
        gateway: { bind: "0.0.0.0", auth: { mode: "none" } },
        tools: { elevated: { enabled: true } },
        sandbox: { mode: "off" },
        workspace: "/etc",
      },
    });
    timings.configPutMs = Date.now() - t0;
    expect(put.status).toBe(200);
    expect(put.json).toMatchObject({ status: "updated", applied: true });
    const config = await gatewayConfig();
    const entry = config.agents?.entries?.main ?? {};
    expect(entry.identity).toEqual({ name: "Sam", emoji: "🦥" });
    for (const key of ["tools", "sandbox", "gateway"]) expect(entry).not.toHaveProperty(key);
    expect(entry.workspace).not.toBe("/etc"); // the gateway's own default stays
    expect(config.gateway?.bind).toBe("lan");
    expect(config.gateway?.auth?.mode).toBe("token");

    // A value the gateway refuses holds back only its own agent, and says why.
    const [second] = await db()<{ id: string; gateway_agent_id: string }[]>`
      select id, gateway_agent_id from agents where user_id = ${user.id} and id <> ${main.id}`;
    const bad = await onAgent(second!.id, configRoute, "/config", {
      method: "PUT",
      body: { thinkingDefault: "not-a-level" },
    });
    expect(bad.json).toMatchObject({
      status: "updated",
      applied: false,
      applyError: expect.stringMatching(/refused/),
    });
    const [refused] = await db()<{ apply_error: string | null }[]>`
      select apply_error from agents where id = ${second!.id}`;
    expect(refused?.apply_error).toMatch(/refused/);
    const afterBad = await gatewayConfig();
    expect(afterBad.agents?.entries?.main?.identity).toEqual({ name: "Sam", emoji: "🦥" });
    expect(afterBad.agents?.entries?.[second!.gateway_agent_id]).not.toHaveProperty(
      "thinkingDefault",
    );
    // Removing keys from the stored configuration removes them from the gateway.
    const cleared = await onAgent(main.id, configRoute, "/config", { method: "PUT", body: {} });
    expect(cleared.json).toMatchObject({ config: {}, applied: true });
    expect((await gatewayConfig()).agents?.entries?.main).not.toHaveProperty("identity");
    const fixed = await onAgent(second!.id, configRoute, "/config", {
      method: "PUT",
      body: { thinkingDefault: "high" },
    });
    expect(fixed.json.applied).toBe(true);
    expect((await gatewayConfig()).agents?.entries?.[second!.gateway_agent_id]).toMatchObject({
      thinkingDefault: "high",
    });
  }, 180_000);

  it("answers live stats from the sampler and real log entries", async () => {
    await sampleAll();
    const stats = await onAgent(main.id, statsRoute, "/stats");
    expect(stats.json.status).toBe("ok");
    expect(stats.json.stats).toMatchObject({
      agentId: main.id,
      cpu: expect.stringMatching(/^\d+\.\d\d%$/),
      memory: expect.stringMatching(/^[\d.]+(MiB|GiB) \/ [\d.]+(MiB|GiB)$/),
      memoryPercent: expect.stringMatching(/^\d+\.\d\d%$/),
      network: expect.stringMatching(/^[\d.]+(MiB|GiB) \/ [\d.]+(MiB|GiB)$/),
      status: "running",
      pids: expect.stringMatching(/^[1-9]\d*$/),
    });
    expect(stats.json.stats.uptime).toBeGreaterThan(0);
    timings.idleMemory = stats.json.stats.memory;

    const logs = await onAgent(main.id, logsRoute, "/logs?limit=500");
    expect(logs.status).toBe(200);
    expect(logs.json).toMatchObject({ limit: 100, status: "ok" });
    expect(logs.json.logs.length).toBeGreaterThan(0);
    expect(logs.json.logs.length).toBeLessThanOrEqual(100);
    expect(logs.json.total).toBeGreaterThanOrEqual(logs.json.logs.length);
    const entry = logs.json.logs[0];
    expect(entry).toEqual({
      id: expect.stringMatching(/^log_/),
      timestamp: expect.stringMatching(/^\d{4}-/),
      level: expect.stringMatching(/^(info|warning|error|debug)$/),
      message: expect.any(String),
      source: expect.any(String),
      agentId: main.id,
    });
    process.stdout.write(`sample log entries ${JSON.stringify(logs.json.logs.slice(0, 3))}\n`);
    const info = await onAgent(main.id, logsRoute, "/logs?level=info&limit=5");
    expect(info.json.logs.every((l: { level: string }) => l.level === "info")).toBe(true);
  }, 60_000);

  it("records a chat turn through the worker's recorder", async () => {
    recorder = new ChatRecorder();
    await recorder.refresh();
    await waitFor(async () => recorder!.watching === 1, { what: "the recorder's connection" });
    const instance = (await getInstanceByUser(user.id)) as InstanceRow;
    const { client } = await connectPaired(instance, instance.gateway_address as string);
    const t0 = Date.now();
    try {
      const sent = await client.request(
        "chat.send",
        {
          sessionKey: "agent:main:main",
          message: "Hello from the platform test",
          idempotencyKey: `test-${testRun}`,
        },
        { timeoutMs: 60_000 },
      );
      process.stdout.write(`chat.send ${JSON.stringify(sent)}\n`);
    } finally {
      client.close();
    }
    const messages = await waitFor(
      async () => {
        await recorder!.refresh(); // the sweep also catches turns whose event was missed
        const res = await onAgent(main.id, messagesRoute, "/messages");
        const list = res.json.messages as Array<{ sender: string; content: string }>;
        return list.some((m) => m.sender === "agent") ? list : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 1_000, what: "the recorded turn" },
    ).catch(async (error) => {
      const { client: c } = await connectPaired(instance, instance.gateway_address as string);
      const history = await c.request("chat.history", { sessionKey: "agent:main:main" });
      const sessions = await c.request("sessions.list", { limit: 5 });
      c.close();
      process.stdout.write(`history ${JSON.stringify(history).slice(0, 4000)}\n`);
      process.stdout.write(`sessions ${JSON.stringify(sessions).slice(0, 2000)}\n`);
      throw error;
    });
    timings.chatRecordedMs = Date.now() - t0;
    process.stdout.write(`recorded ${JSON.stringify(messages)}\n`);
    expect(messages.find((m) => m.sender === "user")?.content).toContain(
      "Hello from the platform test",
    );
    expect(messages.find((m) => m.sender === "agent")?.content.length).toBeGreaterThan(0);
    // Issue 6: the agent's model is the platform's endpoint — the reply is the provider's
    // answer, and the call was metered to this instance with the per-instance token.
    expect(messages.find((m) => m.sender === "agent")?.content).toContain(openai.state.reply);
    await flushMetering();
    const usage = await db()<{ endpoint: string; status: string; user_id: string }[]>`
      select endpoint, status, user_id from ai_usage where instance_id = ${instance.id}`;
    expect(usage.length).toBeGreaterThan(0);
    expect(usage.every((u) => u.endpoint === "agents" && u.user_id === user.id)).toBe(true);
    expect(usage.some((u) => u.status === "ok")).toBe(true);
    const keys = await db()<{ dedupe_key: string }[]>`
      select dedupe_key from agent_messages where agent_id = ${main.id}`;
    process.stdout.write(`dedupe keys ${JSON.stringify(keys.map((k) => k.dedupe_key))}\n`);
    for (const k of keys) expect(k.dedupe_key).toMatch(/^agent:main:main\|(id|t):/);
    // Recording again adds nothing (dedupe keys).
    const before = (await onAgent(main.id, messagesRoute, "/messages")).json.total;
    const fresh = new ChatRecorder();
    await waitFor(
      async () => {
        await fresh.refresh(); // as the worker's timer does: a refresh picks up a running row
        return fresh.watching === 1;
      },
      { what: "a second recorder" },
    );
    await waitFor(
      async () => {
        await fresh.refresh();
        return fresh.connected === 1;
      },
      { what: "the second recorder's connection" },
    );
    await fresh.refresh();
    fresh.stop();
    expect((await onAgent(main.id, messagesRoute, "/messages")).json.total).toBe(before);
  }, 300_000);
});
