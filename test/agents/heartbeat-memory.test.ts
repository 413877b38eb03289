import { ws } from "msw";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as agentRoute from "../../app/routes/api.agent.ts";
import * as heartbeatRoute from "../../app/routes/api.heartbeat.ts";
import * as memoryRoute from "../../app/routes/api.memory.ts";
import { parseEvery } from "../../app/server/agents/heartbeat.server.ts";
import { appendEntry, MEMORY_MAX_CHARS } from "../../app/server/agents/memory.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { call } from "../helpers/api.ts";
import { mswServer } from "../msw/server.ts";
import { createFakeGateway, pairedInstanceAt } from "./fake-gateway.ts";
import { agentUser, apiKeyOf, asUser } from "./support.ts";

// GET/POST/DELETE /api/heartbeat and GET/POST /api/memory against a protocol-level fake
// gateway: shapes, validation, the config patches and file writes the gateway receives,
// ownership, 401/404/502. The real gateway: talk-real.test.ts.

const fake = createFakeGateway();
let owner: { id: string; cookie: string };
let stranger: { id: string; cookie: string };
const MAIN = "agt_hbmainagent0000001";
const HELPER = "agt_hbhelperagent00002";
const OTHERS = "agt_hbstrangeragent003";

async function agentRow(userId: string, id: string, gatewayAgentId: string) {
  await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
    values (${id}, ${userId}, ${id}, ${gatewayAgentId}, 'openai/gpt-4o-mini', 'starter')`;
}

const heartbeat = (who: { cookie?: string; key?: string }, method = "GET", body?: unknown) =>
  asUser(who, heartbeatRoute, "/api/heartbeat", { method, ...(body ? { body } : {}) });
const memory = (who: { cookie?: string; key?: string }, query = "", body?: unknown) =>
  asUser(who, memoryRoute, `/api/memory${query}`, body ? { method: "POST", body } : {});

const heartbeatConfig = () =>
  (fake.state.config.agents as { defaults: { heartbeat?: unknown } }).defaults.heartbeat;

beforeAll(async () => {
  owner = await agentUser();
  stranger = await agentUser();
  await pairedInstanceAt(owner.id);
  await agentRow(owner.id, MAIN, "main");
  await agentRow(owner.id, HELPER, "helper");
  await agentRow(stranger.id, OTHERS, "main");
});

beforeEach(async () => {
  // Each test starts with fresh rate-limit budgets (the counters live in the database).
  resetRateLimiters();
  await db()`delete from rate_limits`;
  fake.use();
  fake.state.config = { agents: { defaults: { model: { primary: "platform/gpt-4o-mini" } } } };
  fake.state.files.clear();
  fake.state.agents = new Set(["main", "helper"]);
  fake.state.calls = [];
  fake.state.staleHashes = 0;
});

afterEach(() => mswServer.resetHandlers());
afterAll(() => closeGatewayClients());

describe("heartbeat settings", () => {
  it("reads OpenClaw's defaults when nothing is set, with a session or an API key", async () => {
    const res = await heartbeat(owner);
    expect(res.status).toBe(200);
    expect(res.json).toEqual({
      heartbeat: {
        enabled: true,
        every: "30m",
        prompt: null,
        activeHours: null,
        target: "owner",
        lightContext: false,
        isolatedSession: false,
        timeoutSeconds: null,
      },
      configured: {},
    });
    const key = await apiKeyOf(owner.id);
    expect((await heartbeat({ key })).json).toEqual(res.json);
  });

  it("applies an update as a merge patch of agents.defaults.heartbeat and answers the result", async () => {
    const res = await heartbeat(owner, "POST", {
      every: "2h",
      prompt: "Check the shared inbox.",
      activeHours: { start: "08:00", end: "24:00", timezone: "Europe/London" },
      target: "none",
      isolatedSession: true,
      lightContext: true,
      timeoutSeconds: 120,
    });
    expect(res.status).toBe(200);
    expect(res.json.heartbeat).toEqual({
      enabled: true,
      every: "2h",
      prompt: "Check the shared inbox.",
      activeHours: { start: "08:00", end: "24:00", timezone: "Europe/London" },
      target: "none",
      lightContext: true,
      isolatedSession: true,
      timeoutSeconds: 120,
    });
    expect(res.json.configured).toEqual(heartbeatConfig());
    // The rest of the gateway's config is untouched.
    expect(fake.state.config.agents).toMatchObject({
      defaults: { model: { primary: "platform/gpt-4o-mini" } },
    });
    const patch = fake.state.calls.find((c) => c.method === "config.patch");
    expect(patch?.params.baseHash).toEqual(expect.any(String));

    // Only what is sent changes; null resets a field; activeHours is replaced as a whole.
    const next = await heartbeat(owner, "POST", {
      prompt: null,
      activeHours: { start: "09:00", end: "17:30" },
    });
    expect(next.json.heartbeat).toMatchObject({
      every: "2h",
      prompt: null,
      activeHours: { start: "09:00", end: "17:30" },
      target: "none",
    });
    expect(heartbeatConfig()).not.toHaveProperty("prompt");

    // GET shows the same.
    expect((await heartbeat(owner)).json).toEqual(next.json);
  });

  it("disables with enabled: false (every 0m) and re-enables at the default cadence", async () => {
    const off = await heartbeat(owner, "POST", { enabled: false });
    expect(off.json.heartbeat).toMatchObject({ enabled: false, every: "0m" });
    expect(heartbeatConfig()).toEqual({ every: "0m" });
    const on = await heartbeat(owner, "POST", { enabled: true });
    expect(on.json.heartbeat).toMatchObject({ enabled: true, every: "30m" });
    expect(heartbeatConfig()).toEqual({});
    // every: "0m" is the same as enabled: false; enabled: true keeps a set cadence.
    await heartbeat(owner, "POST", { every: "45m" });
    expect((await heartbeat(owner, "POST", { enabled: true })).json.heartbeat.every).toBe("45m");
    expect((await heartbeat(owner, "POST", { every: "0m" })).json.heartbeat.enabled).toBe(false);
  });

  it("retries when another writer changed the config in between", async () => {
    fake.state.staleHashes = 2;
    const res = await heartbeat(owner, "POST", { every: "1h" });
    expect(res.status).toBe(200);
    expect(res.json.heartbeat.every).toBe("1h");
    expect(fake.state.calls.filter((c) => c.method === "config.patch")).toHaveLength(3);
    fake.state.staleHashes = 3;
    const refused = await heartbeat(owner, "POST", { every: "2h" });
    expect(refused.status).toBe(502);
    expect(refused.json.error).toMatch(/config changed/);
  });

  it("resets to the platform's settings (no recurring heartbeat) with DELETE", async () => {
    await heartbeat(owner, "POST", { every: "3h", target: "last", lightContext: true });
    const res = await heartbeat(owner, "DELETE");
    expect(res.status).toBe(200);
    expect(res.json.configured).toEqual({ every: "0m" });
    expect(res.json.heartbeat).toMatchObject({ every: "0m", target: "owner", enabled: false });
    expect(heartbeatConfig()).toEqual({ every: "0m" });
    const patch = fake.state.calls.filter((c) => c.method === "config.patch").at(-1);
    expect(JSON.parse(String(patch?.params.raw))).toEqual({
      agents: { defaults: { heartbeat: { every: "0m", target: null, lightContext: null } } },
    });
    // Already the platform's settings: nothing to patch.
    fake.state.calls = [];
    expect((await heartbeat(owner, "DELETE")).status).toBe(200);
    expect(fake.state.calls.map((c) => c.method)).not.toContain("config.patch");
  });

  it("refuses invalid settings with 400 before touching the gateway", async () => {
    const bad: Array<[unknown, RegExp]> = [
      [{}, /at least one/],
      [{ every: "soon" }, /every: .*duration/],
      [{ every: "1m" }, /every: must be between 5m and 24h/],
      [{ every: "2d" }, /every: must be between 5m and 24h/],
      [{ every: "1h", enabled: false }, /enabled: contradicts/],
      [{ every: "0m", enabled: true }, /enabled: contradicts/],
      [{ model: "openai/gpt-4o" }, /Unrecognized key|model/],
      [{ to: "+15551234567" }, /Unrecognized key|to/],
      [{ target: "telegram" }, /target/],
      [{ prompt: "   " }, /prompt: must not be blank/],
      [{ prompt: "x".repeat(4001) }, /prompt/],
      [{ activeHours: { start: "9:00", end: "17:00" } }, /activeHours.start/],
      [{ activeHours: { start: "24:00", end: "23:00" } }, /activeHours.start/],
      [{ activeHours: { start: "08:00", end: "08:00" } }, /must differ/],
      [{ activeHours: { start: "08:00", end: "18:00", timezone: "Mars/Base" } }, /timezone/],
      [{ timeoutSeconds: 0 }, /timeoutSeconds/],
      [{ timeoutSeconds: 1.5 }, /timeoutSeconds/],
      [{ enabled: "yes" }, /enabled/],
    ];
    for (const [body, message] of bad) {
      const res = await heartbeat(owner, "POST", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error, JSON.stringify(body)).toMatch(message);
    }
    expect(fake.state.calls).toEqual([]);
  });

  it("parses durations the way OpenClaw does", () => {
    expect(parseEvery("30m")).toBe(1_800_000);
    expect(parseEvery("45")).toBe(2_700_000); // default unit: minutes
    expect(parseEvery("1h30m")).toBe(5_400_000);
    expect(parseEvery("0m")).toBe(0);
    expect(parseEvery("1.5h")).toBe(5_400_000);
    expect(parseEvery("30 m")).toBeUndefined();
    expect(parseEvery("h1")).toBeUndefined();
    expect(parseEvery("")).toBeUndefined();
  });
});

describe("agent memory", () => {
  it("reads an empty memory, appends entries, replaces it", async () => {
    const empty = await memory(owner);
    expect(empty.status).toBe(200);
    expect(empty.json).toEqual({
      agentId: MAIN,
      content: "",
      chars: 0,
      maxChars: MEMORY_MAX_CHARS,
      updatedAt: null,
    });

    const first = await memory(owner, "", { content: "The user's cat is called Miso." });
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({
      mode: "append",
      agentId: MAIN,
      content: "The user's cat is called Miso.\n",
      updatedAt: expect.any(Number),
    });
    const second = await memory(owner, "", {
      content: "  Prefers short answers.  ",
      mode: "append",
    });
    expect(second.json.content).toBe("The user's cat is called Miso.\n\nPrefers short answers.\n");
    expect(second.json.chars).toBe(second.json.content.length);
    // Written to the first agent's MEMORY.md (gateway id main), guarded by its hash.
    const sets = fake.state.calls.filter((c) => c.method === "agents.files.set");
    expect(sets[0]?.params).toMatchObject({ agentId: "main", name: "MEMORY.md" });
    expect(sets[0]?.params).not.toHaveProperty("expectedHash"); // no file yet
    expect(sets[1]?.params.expectedHash).toEqual(expect.any(String));

    const replaced = await memory(owner, "", { content: "# Memory\n- new start", mode: "replace" });
    expect(replaced.json).toMatchObject({ mode: "replace", content: "# Memory\n- new start" });
    expect((await memory(owner)).json.content).toBe("# Memory\n- new start");
    // replace with "" clears it.
    expect((await memory(owner, "", { content: "", mode: "replace" })).json.content).toBe("");
  });

  it("addresses another of the user's agents by its agt_ id; another user's is 404", async () => {
    await memory(owner, "", { content: "Helper notes", agentId: HELPER });
    const helper = await memory(owner, `?agentId=${HELPER}`);
    expect(helper.json).toMatchObject({ agentId: HELPER, content: "Helper notes\n" });
    expect(fake.state.files.get("helper/MEMORY.md")?.content).toBe("Helper notes\n");
    expect((await memory(owner)).json.content).toBe(""); // main is separate

    const before = fake.state.calls.length;
    const foreign = await memory(owner, `?agentId=${OTHERS}`);
    expect(foreign.status).toBe(404);
    expect(foreign.json).toEqual({ error: "Agent not found" });
    const write = await memory(owner, "", { content: "x", agentId: OTHERS });
    expect(write.status).toBe(404);
    expect((await memory(owner, "?agentId=agt_nosuchagent")).status).toBe(404);
    expect(fake.state.calls.length).toBe(before); // never reached the gateway

    // An agent the gateway does not know yet (its sync is pending): 404 saying so.
    fake.state.agents.delete("helper");
    const pending = await memory(owner, `?agentId=${HELPER}`);
    expect(pending.status).toBe(404);
    expect(pending.json.error).toMatch(/not found in its gateway yet/);
  });

  it("re-reads and appends again when the file changed in between", async () => {
    await memory(owner, "", { content: "one" });
    fake.state.interleave = (s) =>
      s.files.set("main/MEMORY.md", { content: "one\n\nwritten by the agent\n", updatedAtMs: 1 });
    const res = await memory(owner, "", { content: "two" });
    expect(res.status).toBe(200);
    expect(res.json.content).toBe("one\n\nwritten by the agent\n\ntwo\n");
  });

  it("refuses invalid input and memory over the size limit with 400", async () => {
    const bad: Array<[unknown, RegExp]> = [
      [{}, /content/],
      [{ content: "   " }, /content: must not be blank/],
      [{ content: 42 }, /content/],
      [{ content: "x", mode: "prepend" }, /mode/],
      [{ content: "x".repeat(MEMORY_MAX_CHARS + 1) }, /content: must be at most 20000/],
      [{ content: "x", userId: stranger.id }, /Unrecognized key|userId/],
    ];
    for (const [body, message] of bad) {
      const res = await memory(owner, "", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.json.error, JSON.stringify(body)).toMatch(message);
    }
    // The limit holds for the file after the append, not just the entry.
    await memory(owner, "", { content: "y".repeat(MEMORY_MAX_CHARS - 10), mode: "replace" });
    const over = await memory(owner, "", { content: "one more entry" });
    expect(over.status).toBe(400);
    expect(over.json.error).toMatch(/limit is 20000/);
    expect((await memory(owner)).json.chars).toBe(MEMORY_MAX_CHARS - 10);
  });

  it("appends with a blank line between entries", () => {
    expect(appendEntry("", " a ")).toBe("a\n");
    expect(appendEntry("a\n\n\n", "b")).toBe("a\n\nb\n");
    expect(appendEntry("   \n", "b")).toBe("b\n");
  });
});

describe("credentials, missing instances and an unreachable gateway", () => {
  it("answers 401 without credentials", async () => {
    for (const method of ["GET", "POST", "DELETE"]) {
      const res = await call(heartbeatRoute, "/api/heartbeat", {
        method,
        ...(method === "POST" ? { body: { every: "1h" } } : {}),
      });
      expect(res.status).toBe(401);
      expect(res.json.error).toEqual(expect.any(String));
    }
    expect((await call(memoryRoute, "/api/memory")).status).toBe(401);
    expect(
      (await call(memoryRoute, "/api/memory", { method: "POST", body: { content: "x" } })).status,
    ).toBe(401);
    expect(fake.state.calls).toEqual([]);
  });

  it("answers 404 when the user has no instance", async () => {
    const none = await agentUser();
    for (const res of [
      await heartbeat(none),
      await heartbeat(none, "POST", { every: "1h" }),
      await heartbeat(none, "DELETE"),
      await memory(none),
      await memory(none, "", { content: "x" }),
    ]) {
      expect(res.status).toBe(404);
      expect(res.json.error).toMatch(/No agent instance/);
    }
  });

  it("answers 502 when the gateway does not answer", async () => {
    // The gateway's address takes the connection and drops it at once (a stopped container).
    mswServer.use(
      ws
        .link("ws://gateway-down.test:18789")
        .addEventListener("connection", ({ client }) => client.close()),
    );
    const down = await agentUser();
    await pairedInstanceAt(down.id, "gateway-down.test:18789");
    for (const res of [
      await heartbeat(down),
      await heartbeat(down, "POST", { every: "1h" }),
      await heartbeat(down, "DELETE"),
      await memory(down),
      await memory(down, "", { content: "x" }),
    ]) {
      expect(res.status).toBe(502);
      expect(res.json.error).toMatch(/gateway unavailable/i);
    }
  });

  it("counts heartbeat calls in the instance scope and memory calls in the agents scope", async () => {
    for (let i = 0; i < 30; i++) expect((await heartbeat(owner)).status).toBe(200);
    const limited = await heartbeat(owner, "POST", { every: "1h" });
    expect(limited.status).toBe(429);
    expect(limited.json.error).toMatch(/30 per 60 seconds/);
    // The agents scope is a separate budget.
    expect((await memory(owner)).status).toBe(200);
  });

  it("lists both endpoints in GET /api/agent's endpoint map", async () => {
    const res = await asUser(owner, agentRoute, "/api/agent");
    const keys = Object.keys(res.json.endpoints).join("\n");
    for (const e of ["GET /api/memory", "POST /api/memory", "GET /api/heartbeat"]) {
      expect(keys).toContain(e);
    }
    expect(keys).toContain("DELETE /api/heartbeat");
    expect(keys).toContain("POST /api/heartbeat");
  });
});
