import { privateKeyToAccount } from "viem/accounts";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as configRoute from "../../app/routes/api.agents.$id.config.ts";
import * as logsRoute from "../../app/routes/api.agents.$id.logs.ts";
import * as messagesRoute from "../../app/routes/api.agents.$id.messages.ts";
import * as statsRoute from "../../app/routes/api.agents.$id.stats.ts";
import * as detailRoute from "../../app/routes/api.agents.$id.ts";
import * as challengeRoute from "../../app/routes/api.agents.$id.verify.challenge.ts";
import * as verifyRoute from "../../app/routes/api.agents.$id.verify.ts";
import * as provisionRoute from "../../app/routes/api.agents.provision.ts";
import * as listRoute from "../../app/routes/api.agents.ts";
import { parseGatewayLogLine } from "../../app/server/agents/agent-logs.server.ts";
import { recordMessages } from "../../app/server/agents/agent-messages.server.ts";
import { getInstanceByUser, updateInstance } from "../../app/server/agents/instances.server.ts";
import { userForWallet } from "../../app/server/identity/siwe.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { configureAi } from "../ai/support.ts";
import { call, type RouteModule } from "../helpers/api.ts";
import { openApiPaths } from "../helpers/openapi.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import { agentUser, apiKeyOf, asUser, subscribe, uniqueUserId } from "./support.ts";

// The /api/agents routes without Docker: provisioning (validation, 402, the tier limit under
// concurrency), views, configuration, stats (mock and live from the worker's sample row),
// logs' and messages' query handling, verification, and ownership on every route.

const openai = createOpenAiFake();

beforeAll(async () => {
  // No worker here: provisioning does not wait for the instance.
  process.env.AGENT_PROVISION_WAIT_MS = "0";
  mswServer.use(...openai.handlers);
  await configureAi({ OPENAI_API_KEY: "test-key" });
});
beforeEach(() => resetRateLimiters());

const provision = (who: { cookie?: string; key?: string }, body: unknown) =>
  asUser(who, provisionRoute, "/api/agents/provision", { method: "POST", body });

async function provisioned(plan = "solo", body: Record<string, unknown> = { name: "Helper" }) {
  const user = await agentUser(plan);
  const res = await provision(user, body);
  expect(res.status).toBe(201);
  return { user, agent: res.json.agent as { id: string; name: string; model: string } };
}

const onAgent = (
  user: { cookie?: string; key?: string },
  module: unknown,
  id: string,
  sub = "",
  opts: Parameters<typeof asUser>[3] = {},
) => asUser(user, module, `/api/agents/${id}${sub}`, { ...opts, params: { id } });

describe("POST /api/agents/provision", () => {
  it("creates the agent (201), the instance record and queues the gateway sync", async () => {
    const user = await agentUser("solo");
    const options = await asUser(user, provisionRoute, "/api/agents/provision");
    expect(options.status).toBe(200);
    expect(options.json).toEqual({
      success: true,
      agents: [],
      count: 0,
      models: expect.any(Array),
    });
    const models = options.json.models as string[];
    expect(models).toContain("openai/gpt-4o");
    expect(models.at(-1)).toBe("custom");

    const res = await provision(user, { name: "  Helper  ", config: { identity: { name: "H" } } });
    expect(res.status).toBe(201);
    expect(res.json).toEqual({
      success: true,
      agent: {
        id: expect.stringMatching(/^agt_[A-Za-z0-9]{20}$/),
        name: "Helper",
        status: "provisioning",
        websocketUrl: `ws://localhost:3000/agent/${user.id}`.replace(
          "localhost:3000",
          new URL(process.env.APP_URL ?? "http://localhost:3000").host,
        ),
        // Default: the first listed option.
        model: models[0],
        createdAt: expect.any(String),
      },
    });
    const instance = await getInstanceByUser(user.id);
    expect(instance).toMatchObject({ desired_state: "running", model: models[0], plan: "solo" });
    const jobs = await db()<{ name: string; data: { userId?: string; instanceId?: string } }[]>`
      select name, data from pgboss.job
      where name in ('provision-instance', 'sync-agents')
        and (data->>'userId' = ${user.id} or data->>'instanceId' = ${instance!.id})`;
    expect(jobs.map((j) => j.name).sort()).toEqual(["provision-instance", "sync-agents"]);
    const [row] = await db()`select * from agents where id = ${res.json.agent.id}`;
    expect(row).toMatchObject({
      user_id: user.id,
      gateway_agent_id: "main",
      tier: "starter",
      config: { identity: { name: "H" } },
      config_revision: 1,
      applied_revision: 0,
    });
  });

  it("accepts `custom` and a listed model; 400 for anything else", async () => {
    const user = await agentUser("collective");
    expect((await provision(user, { name: "A", model: "custom" })).json.agent.model).toBe("custom");
    expect((await provision(user, { name: "B", model: "openai/gpt-4o-mini" })).status).toBe(201);
    const bad = await provision(user, { name: "C", model: "acme/unknown-9" });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatch(/Unknown model acme\/unknown-9/);
    // The instance's resources follow the monthly plan.
    expect((await getInstanceByUser(user.id))?.plan).toBe("collective");
  });

  it("answers 400 for a missing name and invalid tier or config, 401 signed out", async () => {
    const user = await agentUser("solo");
    for (const body of [
      {},
      { name: "" },
      { name: "   " },
      { name: "x".repeat(101) },
      { name: "A", tier: "gold" },
      { name: "A", config: [1, 2] },
      { name: "A", config: "text" },
      { name: "A", config: { big: "x".repeat(70_000) } },
    ]) {
      const res = await provision(user, body);
      expect(res.status, JSON.stringify(body).slice(0, 60)).toBe(400);
      expect(res.json.error).toEqual(expect.any(String));
    }
    expect((await provision(user, undefined)).status).toBe(400);
    const anonymous = await call(provisionRoute as RouteModule, "/api/agents/provision", {
      method: "POST",
      body: { name: "A" },
    });
    expect(anonymous.status).toBe(401);
    expect(await db()`select 1 from agents where user_id = ${user.id}`).toHaveLength(0);
  });

  it("answers 402 without an active subscription and for a tier above the plan", async () => {
    const none = await agentUser();
    const res = await provision(none, { name: "A" });
    expect(res.status).toBe(402);
    expect(res.json.error).toMatch(/subscription/);
    const solo = await agentUser("solo");
    expect((await provision(solo, { name: "A", tier: "pro" })).status).toBe(402);
    expect(
      await db()`select 1 from agents where user_id in ${db()([none.id, solo.id])}`,
    ).toHaveLength(0);
  });

  it.each([
    ["solo", 1],
    ["collective", 3],
  ])("holds the tier limit under 10 concurrent requests (%s: %i)", async (plan, limit) => {
    const user = await agentUser(plan);
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => provision(user, { name: `Agent ${i}` })),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(limit);
    expect(statuses.filter((s) => s === 429)).toHaveLength(10 - limit);
    expect(results.find((r) => r.status === 429)?.json.error).toMatch(/Agent limit reached/);
    const rows = await db()<{ gateway_agent_id: string }[]>`
      select gateway_agent_id from agents where user_id = ${user.id}`;
    expect(rows).toHaveLength(limit);
    // One `main`; the others are valid OpenClaw agent ids (lowercase, [a-z0-9_-], ≤ 64).
    expect(rows.filter((r) => r.gateway_agent_id === "main")).toHaveLength(1);
    for (const r of rows) expect(r.gateway_agent_id).toMatch(/^[a-z0-9][a-z0-9_-]{0,63}$/);
  });
});

describe("GET /api/agents and /api/agents/:id", () => {
  it("lists the user's agents with an API key", async () => {
    const { user, agent } = await provisioned("collective");
    await provision(user, { name: "Second" });
    const key = await apiKeyOf(user.id);
    const res = await asUser({ key }, listRoute, "/api/agents");
    expect(res.status).toBe(200);
    expect(res.headers.get("ratelimit-policy")).toBe("100;w=60");
    expect(res.json).toMatchObject({ count: 2, status: "ok" });
    expect(res.json.agents[0]).toEqual({
      id: agent.id,
      name: "Helper",
      model: agent.model,
      status: "provisioning",
      websocketUrl: expect.stringMatching(new RegExp(`^ws://.+/agent/${user.id}$`)),
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect(res.json.agents[1].name).toBe("Second");
    expect((await call(listRoute as RouteModule, "/api/agents")).status).toBe(401);
    const other = await agentUser();
    expect((await asUser(other, listRoute, "/api/agents")).json).toEqual({
      agents: [],
      count: 0,
      status: "ok",
    });
  });

  it("limits each user to 100 requests a minute across the agents routes", async () => {
    const user = await agentUser();
    for (let i = 0; i < 60; i++)
      expect((await asUser(user, listRoute, "/api/agents")).status).toBe(200);
    for (let i = 0; i < 40; i++) {
      expect((await asUser(user, provisionRoute, "/api/agents/provision")).status).toBe(200);
    }
    const limited = await asUser(user, listRoute, "/api/agents");
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toMatch(/^\d+$/);
    // Another user has their own budget.
    expect((await asUser(await agentUser(), listRoute, "/api/agents")).status).toBe(200);
  });

  it("shows the detail with the instance's facts and the verification fields", async () => {
    const { user, agent } = await provisioned();
    const instance = await getInstanceByUser(user.id);
    const started = new Date(Date.now() - 60_000);
    await updateInstance(instance!.id, {
      observed_state: "running",
      health: "healthy",
      started_at: started,
      gateway_version: "2026.9.6",
    });
    const res = await onAgent(user, detailRoute, agent.id);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      agent: {
        id: agent.id,
        name: "Helper",
        model: agent.model,
        status: "running",
        startedAt: started.toISOString(),
        plan: "solo",
        subdomain: `${agent.id}.localhost`,
        url: `http://localhost:3000/agents/${agent.id}/ui/`,
        gatewayVersion: "2026.9.6",
        verified: false,
        verificationType: null,
        attestationUid: null,
        verifiedAt: null,
        // Nothing recorded by a worker in this test (decision 0137).
        step: null,
        progress: ["container-created", "gateway-healthy", "paired", "warmed-up", "ready"].map(
          (step) => ({ step, label: expect.any(String), at: null }),
        ),
        // No run recorded, none under way, no history (decision 0158).
        progressAction: "provision",
        progressStartedAt: null,
        estimate: null,
        // Not measured yet, no limit applied (decision 0216).
        storage: {
          usedBytes: 0,
          limitBytes: null,
          percent: null,
          warning: null,
          full: false,
          enforced: false,
          measuredAt: null,
          graceUntil: null,
        },
        // Not asleep: no wake waits in line (decision 0221).
        wakeQueue: null,
        // Its gateway runs: no provision waits for room (decision 0231).
        provisionQueue: null,
      },
      status: "ok",
    });
  });
});

describe("configuration", () => {
  it("stores any JSON object as a new revision; 400 for non-objects and oversize", async () => {
    const { user, agent } = await provisioned("solo", {
      name: "Helper",
      config: { thinkingDefault: "low" },
    });
    const read = await onAgent(user, configRoute, agent.id, "/config");
    expect(read.json).toEqual({ config: { thinkingDefault: "low" }, status: "ok" });
    const config = { identity: { name: "Sam", emoji: "🦥" }, gateway: { bind: "0.0.0.0" }, x: [1] };
    const put = await onAgent(user, configRoute, agent.id, "/config", {
      method: "PUT",
      body: config,
    });
    expect(put.status).toBe(200);
    // The instance is not running: stored, applied later by the worker.
    expect(put.json).toEqual({ config, status: "updated", applied: false });
    const [row] = await db()`select config, config_revision from agents where id = ${agent.id}`;
    expect(row).toEqual({ config, config_revision: 2 });
    expect((await onAgent(user, configRoute, agent.id, "/config")).json.config).toEqual(config);
    for (const body of [[1], "text", 3, null]) {
      const res = await onAgent(user, configRoute, agent.id, "/config", { method: "PUT", body });
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
    const big = await onAgent(user, configRoute, agent.id, "/config", {
      method: "PUT",
      body: { blob: "x".repeat(66_000) },
    });
    expect(big.status).toBe(400);
    expect(big.json.error).toMatch(/65536 bytes/);
    const [after] = await db()`select config_revision from agents where id = ${agent.id}`;
    expect(after?.config_revision).toBe(2);
  });
});

describe("stats", () => {
  it("answers the mock variant from recorded figures while the instance is not live", async () => {
    const { user, agent } = await provisioned();
    const t = Date.now() - 10 * 60_000;
    await recordMessages({ id: agent.id, user_id: user.id }, "agent:main:telegram:direct:1", [
      { sender: "user", content: "hi", timestamp: new Date(t), dedupeKey: "s1:1" },
      { sender: "agent", content: "hello", timestamp: new Date(t + 1500), dedupeKey: "s1:2" },
      { sender: "user", content: "again", timestamp: new Date(t + 60_000), dedupeKey: "s1:3" },
    ]);
    const res = await onAgent(user, statsRoute, agent.id, "/stats");
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      stats: {
        agentId: agent.id,
        messagesProcessed: 2,
        messagesPerHour: 2,
        averageResponseTime: 1500,
        uptime: 0,
        successRate: "50.00%",
        errorRate: "50.00%",
        timestamp: expect.any(String),
        stale: true,
        sampledAt: null,
      },
      status: "mock",
    });
  });

  it("keeps its figures between messages, and moves them as time does", async () => {
    const { user, agent } = await provisioned();
    const stats = async () => (await onAgent(user, statsRoute, agent.id, "/stats")).json.stats;
    // A turn about to leave the last hour, and one unanswered turn about to outgrow the grace.
    const hourAgo = Date.now() - 60 * 60_000 + 1_500;
    const graceAgo = Date.now() - 5 * 60_000 + 1_500;
    await recordMessages({ id: agent.id, user_id: user.id }, "agent:main:main", [
      { sender: "user", content: "old", timestamp: new Date(hourAgo), dedupeKey: "k:1" },
      { sender: "agent", content: "hi", timestamp: new Date(hourAgo + 1000), dedupeKey: "k:2" },
      { sender: "user", content: "late", timestamp: new Date(graceAgo), dedupeKey: "k:3" },
    ]);
    expect(await stats()).toMatchObject({ messagesProcessed: 2, messagesPerHour: 2 });
    expect((await stats()).successRate).toBe("100.00%"); // the late one is not judged yet
    // No message since: the kept figures still follow the clock.
    await expect.poll(async () => (await stats()).messagesPerHour, { timeout: 5_000 }).toBe(1);
    await expect.poll(async () => (await stats()).successRate, { timeout: 5_000 }).toBe("50.00%");
    // A new message is counted at once.
    await recordMessages({ id: agent.id, user_id: user.id }, "agent:main:main", [
      { sender: "user", content: "new", timestamp: new Date(), dedupeKey: "k:4" },
    ]);
    expect((await stats()).messagesProcessed).toBe(3);
  });

  it("answers live figures from the worker's fresh sample", async () => {
    const { user, agent } = await provisioned();
    const instance = await getInstanceByUser(user.id);
    await updateInstance(instance!.id, {
      observed_state: "running",
      health: "healthy",
      started_at: new Date(Date.now() - 3_723_000),
      cpu_percent: 12.345,
      memory_bytes: 256 * 1024 ** 2,
      memory_limit_bytes: 1024 ** 3,
      pids: 17,
      network_rx_bytes: 3 * 1024 ** 2,
      network_tx_bytes: 512 * 1024,
      sampled_at: new Date(),
    });
    const res = await onAgent(user, statsRoute, agent.id, "/stats");
    expect(res.json.status).toBe("ok");
    expect(res.json.stats).toEqual({
      agentId: agent.id,
      cpu: "12.35%",
      memory: "256MiB / 1GiB",
      memoryPercent: "25.00%",
      network: "3MiB / 0.5MiB",
      uptime: expect.any(Number),
      uptimeFormatted: expect.stringMatching(/^1h 2m \d+s$/),
      status: "running",
      pids: "17",
      messagesProcessed: "0",
      messagesPerHour: "0",
      averageResponseTime: "N/A",
      successRate: "N/A",
      errorRate: "N/A",
      stale: false,
    });
    expect(res.json.stats.uptime).toBeGreaterThanOrEqual(3_723_000);
    // A stale sample is not live.
    await updateInstance(instance!.id, { sampled_at: new Date(Date.now() - 10 * 60_000) });
    expect((await onAgent(user, statsRoute, agent.id, "/stats")).json.status).toBe("mock");
  });
});

describe("logs and messages", () => {
  it("validates and clamps the query; 502 when the gateway cannot answer", async () => {
    const { user, agent } = await provisioned();
    const bad = await onAgent(user, logsRoute, agent.id, "/logs?level=verbose");
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatch(/level must be one of info, warning, error, debug/);
    expect((await onAgent(user, logsRoute, agent.id, "/logs?limit=abc")).status).toBe(400);
    // Not provisioned yet (no worker here): the gateway cannot be reached.
    const down = await onAgent(user, logsRoute, agent.id, "/logs?limit=500&level=warning");
    expect(down.status).toBe(502);
  });

  it("parses the gateway's JSONL records (level, subsystem → source, message)", () => {
    const line = JSON.stringify({
      "0": '{"subsystem":"gateway/channels"}',
      "1": "listening",
      _meta: {
        logLevelName: "WARN",
        date: "2026-11-22T04:00:00.000Z",
        name: '{"subsystem":"gateway/channels"}',
      },
      time: "2026-11-22T04:00:00.000Z",
      agent_id: "main",
    });
    expect(parseGatewayLogLine(line)).toEqual({
      id: expect.stringMatching(/^log_[0-9a-f]{20}$/),
      timestamp: "2026-11-22T04:00:00.000Z",
      level: "warning",
      message: "listening",
      source: "gateway/channels",
      gatewayAgentId: "main",
    });
    expect(parseGatewayLogLine("plain text")).toBeUndefined();
    expect(
      parseGatewayLogLine(JSON.stringify({ message: "m", level: "debug", time: "x" })),
    ).toMatchObject({ level: "debug", source: "gateway", message: "m", timestamp: "" });
  });

  it("pages the recorded messages newest first with clamped limits", async () => {
    const { user, agent } = await provisioned();
    const base = Date.now() - 3_600_000;
    await recordMessages(
      { id: agent.id, user_id: user.id },
      "agent:main:discord:channel:9",
      Array.from({ length: 120 }, (_, i) => ({
        sender: i % 2 ? ("agent" as const) : ("user" as const),
        content: `m${i}`,
        timestamp: new Date(base + i * 1000),
        dedupeKey: `d:${i}`,
      })),
    );
    const first = await onAgent(user, messagesRoute, agent.id, "/messages");
    expect(first.json).toMatchObject({ total: 120, limit: 50, offset: 0, status: "ok" });
    expect(first.json.messages).toHaveLength(50);
    expect(first.json.messages[0]).toEqual({
      id: expect.stringMatching(/^msg_/),
      agentId: agent.id,
      sender: "agent",
      content: "m119",
      timestamp: new Date(base + 119_000).toISOString(),
      platform: "chatapp2",
    });
    const clamped = await onAgent(user, messagesRoute, agent.id, "/messages?limit=500&offset=100");
    expect(clamped.json).toMatchObject({ total: 120, limit: 100, offset: 100 });
    expect(clamped.json.messages.map((m: { content: string }) => m.content)[0]).toBe("m19");
    expect(clamped.json.messages).toHaveLength(20);
    expect((await onAgent(user, messagesRoute, agent.id, "/messages?limit=0")).json.limit).toBe(1);
    expect((await onAgent(user, messagesRoute, agent.id, "/messages?offset=-1")).status).toBe(400);
  });
});

describe("verification", () => {
  const wallet = privateKeyToAccount(
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
  );

  it("validates the body (type and required fields → 400)", async () => {
    const { user, agent } = await provisioned();
    for (const body of [
      {},
      { verificationType: "passport" },
      { verificationType: "eas" },
      { verificationType: "exchange" },
      { verificationType: "webauthn" },
      { verificationType: "ens", signature: "0xabc" },
    ]) {
      const res = await onAgent(user, verifyRoute, agent.id, "/verify", { method: "POST", body });
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
  });

  it("verifies with a signature of the challenge by the owner's wallet, reads and removes", async () => {
    const owner = await userForWallet(wallet.address);
    const userId = owner.user.id;
    await subscribe(userId, "solo");
    const user = { cookie: await (await import("../helpers/users.ts")).sessionCookieFor(userId) };
    const created = await provision(user, { name: "Verified" });
    const agentId = created.json.agent.id as string;
    const before = await onAgent(user, verifyRoute, agentId, "/verify");
    expect(before.json).toEqual({
      verified: false,
      verificationType: null,
      attestationUid: null,
      verifierAddress: null,
      verifiedAt: null,
    });
    const challenge = await onAgent(user, challengeRoute, agentId, "/verify/challenge", {
      method: "POST",
    });
    expect(challenge.status).toBe(200);
    const signature = await wallet.signMessage({ message: challenge.json.challenge });
    const res = await onAgent(user, verifyRoute, agentId, "/verify", {
      method: "POST",
      body: { verificationType: "exchange", signature },
    });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      success: true,
      verified: true,
      verificationType: "exchange",
      attestationUid: null,
      verifiedAt: expect.any(String),
    });
    expect((await onAgent(user, detailRoute, agentId)).json.agent).toMatchObject({
      verified: true,
      verificationType: "exchange",
    });
    // The challenge is used up.
    const again = await onAgent(user, verifyRoute, agentId, "/verify", {
      method: "POST",
      body: { verificationType: "exchange", signature },
    });
    expect(again.status).toBe(400);
    const removed = await onAgent(user, verifyRoute, agentId, "/verify", { method: "DELETE" });
    expect(removed.json).toEqual({ success: true });
    expect((await onAgent(user, verifyRoute, agentId, "/verify")).json.verified).toBe(false);
    // Deleting the agent deletes its verification (foreign key, migration 0008).
    await onAgent(user, challengeRoute, agentId, "/verify/challenge", { method: "POST" });
    await db()`delete from agents where id = ${agentId}`;
    expect(
      await db()`select 1 from agent_verification_challenges where agent_id = ${agentId}`,
    ).toHaveLength(0);
  });
});

describe("ownership", () => {
  it("answers 404 for another user's agent and for an unknown id on every route", async () => {
    const { agent } = await provisioned();
    const intruder = await agentUser("solo");
    const cases: Array<[unknown, string, string, unknown?]> = [
      [detailRoute, "", "GET"],
      [configRoute, "/config", "GET"],
      [configRoute, "/config", "PUT", { a: 1 }],
      [statsRoute, "/stats", "GET"],
      [logsRoute, "/logs", "GET"],
      [messagesRoute, "/messages", "GET"],
      [verifyRoute, "/verify", "GET"],
      [
        verifyRoute,
        "/verify",
        "POST",
        { verificationType: "eas", attestationUid: `0x${"1".repeat(64)}` },
      ],
      [verifyRoute, "/verify", "DELETE"],
      [challengeRoute, "/verify/challenge", "POST"],
    ];
    for (const id of [agent.id, `agt_${"x".repeat(20)}`]) {
      for (const [module, sub, method, body] of cases) {
        const res = await onAgent(intruder, module, id, sub, { method, body });
        expect(res.status, `${method} ${sub} ${id}`).toBe(404);
        expect(res.json).toEqual({ error: "Agent not found" });
      }
    }
    const [row] = await db()`select config_revision from agents where id = ${agent.id}`;
    expect(row?.config_revision).toBe(1);
    expect(await db()`select 1 from agent_verifications where agent_id = ${agent.id}`).toHaveLength(
      0,
    );
    expect(uniqueUserId()).not.toBe(uniqueUserId());
  });
});

describe("the OpenAPI document", () => {
  it("describes every agents route with the user's auth", () => {
    const modules: Record<string, unknown> = {
      "api/agents": listRoute,
      "api/agents/provision": provisionRoute,
      "api/agents/:id": detailRoute,
      "api/agents/:id/config": configRoute,
      "api/agents/:id/stats": statsRoute,
      "api/agents/:id/logs": logsRoute,
      "api/agents/:id/messages": messagesRoute,
      "api/agents/:id/verify": verifyRoute,
      "api/agents/:id/verify/challenge": challengeRoute,
    };
    const paths = openApiPaths(modules);
    expect(Object.keys(paths)).toHaveLength(9);
    expect(paths["/api/agents/{id}/config"]!.put.security).toEqual([
      { session: [] },
      { apiKey: [] },
    ]);
    expect(paths["/api/agents/provision"]!.post).toBeTruthy();
  });
});
