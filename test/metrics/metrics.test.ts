import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import * as historicalRoute from "../../app/routes/api.metrics.$userId.historical.ts";
import * as performanceRoute from "../../app/routes/api.metrics.$userId.performance.ts";
import * as summaryRoute from "../../app/routes/api.metrics.$userId.summary.ts";
import * as platformRoute from "../../app/routes/api.metrics.ts";
import { recordMessages } from "../../app/server/agents/agent-messages.server.ts";
import { ensureInstanceRecord, updateInstance } from "../../app/server/agents/instances.server.ts";
import { resetPlatformMetricsCache } from "../../app/server/metrics/platform.server.ts";
import { resetPopulationCache } from "../../app/server/metrics/summary.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { call, type RouteModule } from "../helpers/api.ts";
import { openApiPaths } from "../helpers/openapi.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// The metrics endpoints against hand-computed figures: two users' agents, messages, AI calls
// and instances, then three more users to pass the population threshold. Every figure below is
// worked out from the rows this file inserts (see the comments next to each expectation).

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const floorTo = (t: number, step: number) => new Date(Math.floor(t / step) * step).toISOString();

const A = "usr_metrics_alice";
const B = "usr_metrics_bob";
const LATER = ["usr_metrics_carol", "usr_metrics_dave", "usr_metrics_erin"] as const;
let cookieA = "";
let cookieB = "";
/** The start of the hour the test runs in (rows are placed relative to it) and "now". */
let H = 0;
let now = 0;

async function agent(id: string, userId: string, name: string) {
  await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
    values (${id}, ${userId}, ${name}, ${id}, 'openai/gpt-4o', 'starter')`;
  return { id, user_id: userId };
}

/** A turn: a user message at `at` and, unless `replyMs` is null, the agent's reply after it. */
async function turn(a: { id: string; user_id: string }, at: number, replyMs: number | null) {
  const key = randomUUID();
  await recordMessages(a, `agent:${a.id}:telegram:direct:${key}`, [
    { sender: "user", content: "q", timestamp: new Date(at), dedupeKey: `${key}:1` },
    ...(replyMs === null
      ? []
      : [
          {
            sender: "agent" as const,
            content: "a",
            timestamp: new Date(at + replyMs),
            dedupeKey: `${key}:2`,
          },
        ]),
  ]);
}

async function aiCall(
  userId: string,
  at: number,
  o: { prompt?: number; completion?: number; cost?: number; latency: number; ok?: boolean },
) {
  const ok = o.ok ?? true;
  await db()`insert into ai_usage (id, user_id, endpoint, model, prompt_tokens, completion_tokens,
      cost_micro_usd, billing_mode, latency_ms, status, http_status, created_at)
    values (${randomUUID()}, ${userId}, 'agents', 'openai/gpt-4o', ${o.prompt ?? 0},
      ${o.completion ?? 0}, ${o.cost ?? 0}, 'credits', ${o.latency}, ${ok ? "ok" : "error"},
      ${ok ? 200 : 502}, ${new Date(at)})`;
}

const asA = (module: unknown, path: string, params: Record<string, string> = { userId: A }) =>
  call(module as RouteModule, path, { headers: { cookie: cookieA }, params });

const platform = (ip = "127.0.0.1") =>
  call(platformRoute as RouteModule, "/api/metrics", { remoteAddress: ip });

afterAll(() => {
  vi.useRealTimers();
});

beforeAll(async () => {
  // Rows are placed by the hour: the file runs on a JavaScript clock held still (Date only), no
  // later than the middle of the current hour, so no hour or day ends while it runs.
  // PostgreSQL's now() keeps the real time, at most 30 minutes ahead: no row is placed that
  // close to a 24-hour boundary.
  const real = Date.now();
  vi.useFakeTimers({
    toFake: ["Date"],
    now: Math.min(real, Math.floor(real / HOUR) * HOUR + HOUR / 2),
  });
  now = Date.now();
  H = Math.floor(now / HOUR) * HOUR;
  cookieA = await sessionCookieFor(A);
  cookieB = await sessionCookieFor(B);

  // Alice: two agents, a running instance.
  const a1 = await agent("agt_metrics_a1", A, "Alpha");
  await agent("agt_metrics_a2", A, "Beta");
  const t = H - 3 * HOUR + 10 * 60_000;
  await turn(a1, t, 2000); // answered in 2 s
  await turn(a1, t + 60_000, 4000); // answered in 4 s
  await turn(a1, now - 10 * 60_000, 1000); // the last hour: answered in 1 s
  await turn({ id: "agt_metrics_a2", user_id: A }, H - 2 * DAY + 10 * 60_000, null); // never
  await aiCall(A, H - 3 * HOUR + 5 * 60_000, {
    prompt: 100,
    completion: 50,
    cost: 1500,
    latency: 200,
  });
  await aiCall(A, H - 3 * HOUR + 6 * 60_000, {
    prompt: 200,
    completion: 100,
    cost: 2500,
    latency: 400,
  });
  await aiCall(A, H - 3 * HOUR + 7 * 60_000, { prompt: 10, latency: 1000, ok: false });
  await aiCall(A, H - 2 * DAY + 20 * 60_000, {
    prompt: 1000,
    completion: 500,
    cost: 10_000,
    latency: 600,
  });
  await aiCall(A, now - 10 * 60_000, { prompt: 10, completion: 10, cost: 100, latency: 300 });
  const instanceA = await ensureInstanceRecord(A);
  await updateInstance(instanceA.id, {
    observed_state: "running",
    health: "healthy",
    started_at: new Date(now - HOUR),
    cpu_percent: 12.345,
    memory_bytes: 256 * 1024 ** 2,
    memory_limit_bytes: 1024 ** 3,
    pids: 17,
    network_rx_bytes: 3000,
    network_tx_bytes: 4000,
    storage_bytes: 5 * 1024 ** 2,
    sampled_at: new Date(),
  });

  // Bob: one agent, one answered turn, two AI calls, a stopped instance.
  const b1 = await agent("agt_metrics_b1", B, "Bobby");
  await turn(b1, now - 5 * HOUR, 500);
  await aiCall(B, now - 5 * HOUR, { prompt: 10, completion: 10, cost: 1000, latency: 100 });
  await aiCall(B, now - 5 * HOUR, { prompt: 10, completion: 10, cost: 1000, latency: 300 });
  await updateInstance((await ensureInstanceRecord(B)).id, { observed_state: "stopped" });
});

beforeEach(() => {
  resetRateLimiters();
  resetPlatformMetricsCache();
  resetPopulationCache();
});

const zeroMessages = {
  received: 0,
  answered: 0,
  averageResponseMs: null,
  successRate: null,
  errorRate: null,
};
const zeroAi = {
  calls: 0,
  failed: 0,
  errorRate: null,
  promptTokens: 0,
  completionTokens: 0,
  tokens: 0,
  costUsd: 0,
  latencyMs: { p50: null, p95: null },
};

/**
 * Alice's AI calls of the last 24 hours: four, one failed; the successful ones took 200, 300
 * and 400 ms (p50 300; p95 at 1.9 of 2: 300 + 0.9 × 100 = 390); 0.0041 USD.
 */
const aliceAiLast24h = {
  calls: 4,
  failed: 1,
  errorRate: 25,
  promptTokens: 320,
  completionTokens: 160,
  tokens: 480,
  costUsd: 0.0041,
  latencyMs: { p50: 300, p95: 390 },
};

describe("who may read what", () => {
  const perUser = [
    [historicalRoute, "historical"],
    [performanceRoute, "performance"],
    [summaryRoute, "summary"],
  ] as const;

  it("answers 401 without credentials and 404 for anyone else's id", async () => {
    for (const [module, sub] of perUser) {
      const anonymous = await call(module as RouteModule, `/api/metrics/${A}/${sub}`, {
        params: { userId: A },
      });
      expect(anonymous.status, sub).toBe(401);
      expect(anonymous.json).toEqual({ error: expect.any(String) });
      for (const other of [B, "usr_nobody"]) {
        const res = await asA(module, `/api/metrics/${other}/${sub}`, { userId: other });
        expect(res.status, `${sub} ${other}`).toBe(404);
        expect(res.json).toEqual({ error: "User not found" });
      }
      const bad = await asA(module, `/api/metrics/a b/${sub}`, { userId: "a b" });
      expect(bad.status).toBe(400);
      expect(bad.json.error).toMatch(/userId: must be a user id/);
      // Bob reads his own.
      const own = await call(module as RouteModule, `/api/metrics/${B}/${sub}`, {
        headers: { cookie: cookieB },
        params: { userId: B },
      });
      expect(own.status, sub).toBe(200);
    }
  });
});

describe("GET /api/metrics/:userId/historical", () => {
  it("gives 24 hourly points of the user's own figures, zeros where nothing happened", async () => {
    const res = await asA(historicalRoute, `/api/metrics/${A}/historical?period=24h`);
    expect(res.status).toBe(200);
    const h = res.json.historical;
    expect(h).toMatchObject({
      userId: A,
      period: "24h",
      interval: "hour",
      from: new Date(H - 23 * HOUR).toISOString(),
      to: new Date(H + HOUR).toISOString(),
    });
    expect(h.points).toHaveLength(24);
    const at = (t: number) => h.points.find((p: { start: string }) => p.start === floorTo(t, HOUR));
    // Three hours ago: two answered turns (2 s, 4 s); three calls, one failed; the successful
    // ones took 200 and 400 ms (p50 300, p95 200 + 0.95 × 200 = 390).
    expect(at(H - 3 * HOUR)).toEqual({
      start: new Date(H - 3 * HOUR).toISOString(),
      messages: {
        received: 2,
        answered: 2,
        averageResponseMs: 3000,
        successRate: 100,
        errorRate: 0,
      },
      ai: {
        calls: 3,
        failed: 1,
        errorRate: 33.33,
        promptTokens: 310,
        completionTokens: 150,
        tokens: 460,
        costUsd: 0.004,
        latencyMs: { p50: 300, p95: 390 },
      },
    });
    const recent = at(now - 10 * 60_000);
    expect(recent.messages).toMatchObject({ received: 1, answered: 1, averageResponseMs: 1000 });
    expect(recent.ai).toMatchObject({ calls: 1, tokens: 20, costUsd: 0.0001 });
    expect(at(H - 10 * HOUR)).toMatchObject({ messages: zeroMessages, ai: zeroAi });
    // The day's totals: three answered turns (2, 4, 1 s: 2333 ms); four calls, one failed;
    // successful latencies 200, 300, 400 (p95: 300 + 0.9 × 100 = 390). Bob's rows are not here.
    expect(h.totals).toEqual({
      messages: {
        received: 3,
        answered: 3,
        averageResponseMs: 2333,
        successRate: 100,
        errorRate: 0,
      },
      ai: aliceAiLast24h,
    });
  });

  it("gives daily points over 7 days by default, the unanswered turn counting as failed", async () => {
    const res = await asA(historicalRoute, `/api/metrics/${A}/historical`);
    expect(res.status).toBe(200);
    const h = res.json.historical;
    expect(h.period).toBe("7d");
    expect(h.interval).toBe("day");
    expect(h.points).toHaveLength(7);
    expect(h.from).toBe(new Date(Math.floor(now / DAY) * DAY - 6 * DAY).toISOString());
    const twoDaysAgo = h.points.find(
      (p: { start: string }) => p.start === floorTo(H - 2 * DAY, DAY),
    );
    expect(twoDaysAgo.messages).toEqual({
      received: 1,
      answered: 0,
      averageResponseMs: null,
      successRate: 0,
      errorRate: 100,
    });
    expect(twoDaysAgo.ai).toMatchObject({ calls: 1, tokens: 1500, costUsd: 0.01 });
    // Four turns, three answered; five calls, one failed; successful latencies 200, 300, 400,
    // 600 (p50 350; p95 at 2.85 of 3: 400 + 0.85 × 200 = 570).
    expect(h.totals).toEqual({
      messages: {
        received: 4,
        answered: 3,
        averageResponseMs: 2333,
        successRate: 75,
        errorRate: 25,
      },
      ai: {
        calls: 5,
        failed: 1,
        errorRate: 20,
        promptTokens: 1320,
        completionTokens: 660,
        tokens: 1980,
        costUsd: 0.0141,
        latencyMs: { p50: 350, p95: 570 },
      },
    });
    const sum = h.points.reduce((n: number, p: { ai: { calls: number } }) => n + p.ai.calls, 0);
    expect(sum).toBe(5);
  });

  it("validates period and interval (400 {error})", async () => {
    for (const [query, message] of [
      ["period=1y", /period must be one of 24h, 7d, 30d, 90d/],
      ["interval=minute", /interval must be hour or day/],
      ["period=30d&interval=hour", /hour is allowed for periods up to 7d/],
    ] as const) {
      const res = await asA(historicalRoute, `/api/metrics/${A}/historical?${query}`);
      expect(res.status, query).toBe(400);
      expect(res.json.error).toMatch(message);
    }
    const hourly = await asA(
      historicalRoute,
      `/api/metrics/${A}/historical?period=7d&interval=hour`,
    );
    expect(hourly.json.historical.points).toHaveLength(168);
    const daily = await asA(historicalRoute, `/api/metrics/${A}/historical?period=90d`);
    expect(daily.json.historical.points).toHaveLength(90);
  });
});

describe("GET /api/metrics/:userId/performance", () => {
  it("gives the instance's live sample and the last 24 hours' figures, per agent too", async () => {
    const res = await asA(performanceRoute, `/api/metrics/${A}/performance`);
    expect(res.status).toBe(200);
    const p = res.json.performance;
    expect(p.window).toBe("24h");
    expect(p.instance).toEqual({
      status: "running",
      health: "healthy",
      plan: "solo",
      gatewayVersion: "unknown",
      startedAt: new Date(now - HOUR).toISOString(),
      uptimeMs: expect.any(Number),
      live: true,
      sampledAt: expect.any(String),
      cpuPercent: 12.35,
      memoryBytes: 256 * 1024 ** 2,
      memoryLimitBytes: 1024 ** 3,
      memoryPercent: 25,
      pids: 17,
      networkRxBytes: 3000,
      networkTxBytes: 4000,
      storageBytes: 5 * 1024 ** 2,
      oomKills: 0,
    });
    expect(p.instance.uptimeMs).toBeGreaterThanOrEqual(HOUR);
    const last24h = {
      received: 3,
      answered: 3,
      averageResponseMs: 2333,
      successRate: 100,
      errorRate: 0,
      lastHour: 1,
    };
    expect(p.messages).toEqual(last24h);
    expect(p.ai).toEqual({ ...aliceAiLast24h, lastHour: 1 });
    // Beta's only turn is two days old: nothing in the window.
    expect(p.agents).toEqual([
      { id: "agt_metrics_a1", name: "Alpha", model: "openai/gpt-4o", messages: last24h },
      {
        id: "agt_metrics_a2",
        name: "Beta",
        model: "openai/gpt-4o",
        messages: { ...zeroMessages, lastHour: 0 },
      },
    ]);
  });

  it("gives no figures from a stale sample, and null without an instance", async () => {
    const [row] = await db()`select id from instances where user_id = ${A}`;
    await updateInstance(row!.id, { sampled_at: new Date(Date.now() - 10 * 60_000) });
    try {
      const stale = (await asA(performanceRoute, `/api/metrics/${A}/performance`)).json;
      expect(stale.performance.instance).toMatchObject({
        live: false,
        cpuPercent: null,
        memoryBytes: null,
        memoryPercent: null,
        pids: null,
        memoryLimitBytes: 1024 ** 3,
      });
    } finally {
      await updateInstance(row!.id, { sampled_at: new Date() });
    }
    const bob = await call(performanceRoute as RouteModule, `/api/metrics/${B}/performance`, {
      headers: { cookie: cookieB },
      params: { userId: B },
    });
    expect(bob.json.performance.instance).toMatchObject({ status: "stopped", uptimeMs: null });
    const noInstance = "usr_metrics_empty";
    const empty = await call(
      performanceRoute as RouteModule,
      `/api/metrics/${noInstance}/performance`,
      { headers: { cookie: await sessionCookieFor(noInstance) }, params: { userId: noInstance } },
    );
    expect(empty.json.performance).toMatchObject({ instance: null, agents: [], ai: { calls: 0 } });
    await db()`delete from users where id = ${noInstance}`;
  });
});

/** Publishing figures needs five active users: Carol, Dave and Erin join Alice and Bob. */
async function threeMoreUsers() {
  const t = now - 90 * 60_000;
  for (const id of LATER) await ensureUser(id);
  const [carol, dave, erin] = LATER;
  await aiCall(carol, t, { prompt: 100, cost: 5000, latency: 1000 });
  await aiCall(dave, t, { latency: 50, ok: false });
  await aiCall(dave, t, { prompt: 30, completion: 20, cost: 3000, latency: 700 });
  const e1 = await agent("agt_metrics_e1", erin, "Echo");
  await turn(e1, now - 2 * HOUR, null);
  await turn(e1, now - 2 * HOUR + 1000, null);
  await aiCall(erin, t, { latency: 400 });
}

describe("GET /api/metrics/:userId/summary and GET /api/metrics", () => {
  it("withholds the platform's figures below five active users", async () => {
    const res = await asA(summaryRoute, `/api/metrics/${A}/summary`);
    expect(res.status).toBe(200);
    const s = res.json.summary;
    expect(s).toMatchObject({
      userId: A,
      period: "30d",
      population: { activeUsers: 2, minimum: 5 },
      withheld: expect.stringMatching(/Fewer than 5 active users/),
    });
    // Alice's own figures over 30 days; no medians.
    expect(s.figures).toEqual({
      messages: { value: 4, median: null, ratio: null },
      averageResponseMs: { value: 2333, median: null, ratio: null },
      successRate: { value: 75, median: null, ratio: null },
      aiCalls: { value: 5, median: null, ratio: null },
      aiTokens: { value: 1980, median: null, ratio: null },
      aiCostUsd: { value: 0.0141, median: null, ratio: null },
      aiErrorRate: { value: 20, median: null, ratio: null },
      aiLatencyP50Ms: { value: 350, median: null, ratio: null },
    });

    const pub = await platform();
    expect(pub.status).toBe(200);
    expect(pub.headers.get("cache-control")).toBe("public, max-age=10");
    expect(pub.json).toEqual({
      metrics: {
        generatedAt: expect.any(String),
        version: expect.any(String),
        uptimeSeconds: expect.any(Number),
        users: 2,
        agents: 3,
        instances: { total: 2, running: 1 },
        last24h: {
          activeUsers: 2,
          withheld: expect.stringMatching(/Fewer than 5 active users/),
          messages: null,
          aiCalls: null,
          aiTokens: null,
          aiErrorRate: null,
          aiLatencyMs: null,
        },
      },
      status: "ok",
    });
    const bad = await asA(summaryRoute, `/api/metrics/${A}/summary?period=24h`);
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatch(/period must be one of 7d, 30d, 90d/);
  });

  it("compares with the medians of five active users, each needing five users", async () => {
    await threeMoreUsers();
    const s = (await asA(summaryRoute, `/api/metrics/${A}/summary?period=30d`)).json.summary;
    expect(s.population).toEqual({ activeUsers: 5, minimum: 5 });
    expect(s.withheld).toBeNull();
    // Per user (Alice, Bob, Carol, Dave, Erin):
    //   turns 4, 1, 0, 0, 2 → median 1; AI calls 5, 2, 1, 2, 1 → 2;
    //   tokens 1980, 40, 100, 50, 0 → 50; cost 0.0141, 0.002, 0.005, 0.003, 0 → 0.003;
    //   error rate 20, 0, 0, 50, 0 → 0 (no ratio to a zero);
    //   p50 latency 350, 200, 1000, 700, 400 → 400;
    //   response time only Alice and Bob, success rate only Alice, Bob, Erin: withheld.
    expect(s.figures).toEqual({
      messages: { value: 4, median: 1, ratio: 4 },
      averageResponseMs: { value: 2333, median: null, ratio: null },
      successRate: { value: 75, median: null, ratio: null },
      aiCalls: { value: 5, median: 2, ratio: 2.5 },
      aiTokens: { value: 1980, median: 50, ratio: 39.6 },
      aiCostUsd: { value: 0.0141, median: 0.003, ratio: 4.7 },
      aiErrorRate: { value: 20, median: 0, ratio: null },
      aiLatencyP50Ms: { value: 350, median: 400, ratio: 0.88 },
    });
  });

  it("publishes aggregates only, and none of any user's own", async () => {
    const pub = await platform();
    // Last 24 hours: messages 6 (Alice) + 2 (Bob) + 2 (Erin); calls 4 + 2 + 1 + 2 + 1, two
    // failed; tokens 480 + 40 + 100 + 50 + 0; successful latencies 100, 200, 300, 300, 400,
    // 400, 700, 1000 (p50 350; p95 at 6.65 of 7: 700 + 0.65 × 300 = 895).
    expect(pub.json.metrics).toMatchObject({
      users: 5,
      agents: 4,
      instances: { total: 2, running: 1 },
      last24h: {
        activeUsers: 5,
        withheld: null,
        messages: 10,
        aiCalls: 10,
        aiTokens: 670,
        aiErrorRate: 20,
        aiLatencyMs: { p50: 350, p95: 895 },
      },
    });
    expect(Object.keys(pub.json.metrics).sort()).toEqual(
      ["agents", "generatedAt", "instances", "last24h", "uptimeSeconds", "users", "version"].sort(),
    );
    for (const secret of [A, B, ...LATER, "Alpha", "agt_metrics", "usr_", "costUsd", "0.0141"]) {
      expect(pub.text).not.toContain(secret);
    }
  });

  it("caches for a few seconds and limits each IP to 60 a minute", async () => {
    const before = (await platform()).json.metrics.last24h.aiCalls;
    await aiCall(B, Date.now(), { latency: 100 });
    expect((await platform()).json.metrics.last24h.aiCalls).toBe(before);
    resetPlatformMetricsCache();
    expect((await platform()).json.metrics.last24h.aiCalls).toBe(before + 1);

    for (let i = 0; i < 60; i++) expect((await platform("10.9.9.9")).status).toBe(200);
    const limited = await platform("10.9.9.9");
    expect(limited.status).toBe(429);
    expect(limited.json.error).toMatch(/Too many requests/);
    expect((await platform("10.9.9.10")).status).toBe(200);
  });
});

describe("the OpenAPI document", () => {
  it("describes the four routes, public and per user, with their queries", () => {
    const modules: Record<string, unknown> = {
      "api/metrics": platformRoute,
      "api/metrics/:userId/historical": historicalRoute,
      "api/metrics/:userId/performance": performanceRoute,
      "api/metrics/:userId/summary": summaryRoute,
    };
    const paths = openApiPaths(modules);
    expect(Object.keys(paths).sort()).toEqual([
      "/api/metrics",
      "/api/metrics/{userId}/historical",
      "/api/metrics/{userId}/performance",
      "/api/metrics/{userId}/summary",
    ]);
    expect(paths["/api/metrics"]!.get.security ?? []).toEqual([]);
    expect(paths["/api/metrics/{userId}/summary"]!.get.security).toEqual([
      { session: [] },
      { apiKey: [] },
    ]);
    const query = paths["/api/metrics/{userId}/historical"]!.get.parameters.filter(
      (p: { in: string }) => p.in === "query",
    );
    expect(query.map((p: { name: string }) => p.name).sort()).toEqual(["interval", "period"]);
  });
});
