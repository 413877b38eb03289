import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import * as channelsTab from "../../app/routes/agents.$id.channels.tsx";
import * as chatPage from "../../app/routes/agents.$id.chat.tsx";
import * as skillsTab from "../../app/routes/agents.$id.skills.tsx";
import * as agentRoute from "../../app/routes/api.agent.ts";
import * as chatRoute from "../../app/routes/api.chat.ts";
import * as heartbeatRoute from "../../app/routes/api.heartbeat.ts";
import * as memoryRoute from "../../app/routes/api.memory.ts";
import { createApiKey } from "../../app/server/accounts/api-keys.server.ts";
import { listMessages } from "../../app/server/agents/agent-messages.server.ts";
import {
  ensureInstanceRecord,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { attachLiveSocket } from "../../app/server/agents/live-socket.server.ts";
import { flushRecords } from "../../app/server/agents/talk.server.ts";
import { removeUserKeys } from "../../app/server/ai/byok.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { generateDeviceIdentity } from "../../app/server/openclaw/device-identity.server.ts";
import { seal } from "../../app/server/platform/crypto.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { STATE_DIR } from "../../worker/instances/engine.ts";
import { connectPaired } from "../../worker/instances/pairing.ts";
import { balanceOf, giveCredits } from "../ai/support.ts";
import { call, type RouteModule } from "../helpers/api.ts";
import {
  type GatewayBench,
  provisionRealGateway,
  startGatewayBench,
  stopGatewayBench,
} from "../helpers/real-gateway.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { describeDocker } from "../runtime/docker-support.ts";

// Talking to an agent end to end: the real OpenClaw gateway in a container, whose model
// provider is the platform's AI endpoint (/api/ai/v1, served here on the bridge network's
// gateway IP) and the AI layer's OpenAI provider answered by msw. One instance, provisioned
// once, serves every test: GET/POST /api/agent, /api/chat, the live agent socket, and a chat
// of an owner out of credits (last; a boot of its own cost ~30 CPU-seconds, issue 23).

const openai = createOpenAiFake();
const REPLY =
  "Hello from the fake model! This reply is deliberately longer than one hundred characters so that memory truncates it.";
const USER = "usr_talk_owner";
let bench: GatewayBench | undefined;
let base: string;
let agentId: string;
let instance: InstanceRow;
const timings: Record<string, number> = {};
/** The statuses of the platform's AI endpoint's chat completions, as the gateway received them. */
const aiStatuses: number[] = [];

const auth = async (userId = USER) => ({ cookie: await sessionCookieFor(userId) });
const getAgent = async (query: string, userId = USER) =>
  call(agentRoute, `/api/agent${query}`, { headers: await auth(userId) });
const postAgent = async (body: unknown, userId = USER) =>
  call(agentRoute, "/api/agent", { method: "POST", body, headers: await auth(userId) });

/** Opens the live socket and collects its frames; resolves once it is open or closed. */
function openSocket(url: string, headers: Record<string, string>) {
  const ws = new WebSocket(url, { headers });
  const frames: Array<Record<string, unknown>> = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on("close", (code, reason) => resolve({ code, reason: String(reason) })),
  );
  ws.on("message", (data) => frames.push(JSON.parse(String(data))));
  return { ws, frames, closed };
}

describeDocker("talking to an agent (real gateway)", () => {
  beforeAll(async () => {
    openai.state.reply = REPLY;
    // The platform's AI endpoint, /api/agent (for the latency measurement over real HTTP) and
    // the live socket, on the address containers can reach.
    bench = await startGatewayBench({
      openai,
      routes: { "/api/agent": agentRoute as unknown as RouteModule },
      onServer: attachLiveSocket,
      onResponse: (path, status) => {
        if (path === "/api/ai/v1/chat/completions") aiStatuses.push(status);
      },
    });
    base = bench.base;

    await sessionCookieFor(USER);
    await giveCredits(USER, 5_000_000);
    agentId = "agt_talkowner000000000";
    await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
      values (${agentId}, ${USER}, 'Talker', 'main', 'openai/gpt-4o-mini', 'starter')`;
    ({ instance, provisionMs: timings.provisionMs } = await provisionRealGateway(USER));
  }, 300_000);

  afterAll(async () => {
    process.stdout.write(`talk timings ${JSON.stringify(timings)}\n`);
    await stopGatewayBench(bench);
  });

  it("describes itself and reports the gateway's health", async () => {
    const info = await getAgent("");
    expect(info.status).toBe(200);
    expect(info.json).toMatchObject({
      apiVersion: expect.stringMatching(/^\d+\.\d+\.\d+$/),
      platformVersion: expect.any(String),
    });
    expect(Object.keys(info.json.endpoints).length).toBeGreaterThan(5);

    const health = await getAgent("?action=health");
    expect(health.status).toBe(200);
    expect(health.json).toMatchObject({
      status: "healthy",
      version: expect.stringMatching(/2026\.9\.6/),
      apiVersion: info.json.apiVersion,
      uptime: expect.any(Number),
      model: expect.stringContaining("gpt-4o-mini"),
      channels: [],
      skills: expect.any(Array),
    });
    expect(Number.isInteger(health.json.uptime)).toBe(true);
    expect(Math.abs(health.json.lastSeen - Date.now())).toBeLessThan(60_000);
  });

  it("creates a session, chats in it, shows it with its messages, memory and records", async () => {
    const created = await postAgent({ action: "create-session" });
    expect(created.status).toBe(200);
    expect(created.json).toEqual({
      sessionId: expect.stringMatching(/^agent:main:/),
      status: "active",
    });
    const sessionId = created.json.sessionId as string;

    const listed = await getAgent("?action=sessions");
    expect(listed.json.sessions).toContainEqual(
      expect.objectContaining({ id: sessionId, status: "active", createdAt: expect.any(Number) }),
    );

    let t = Date.now();
    const first = await postAgent({ action: "chat", message: "Hi there", sessionId });
    timings.firstChatMs = Date.now() - t;
    expect(first.status).toBe(200);
    expect(first.json).toEqual({ sessionId, reply: REPLY, timestamp: expect.any(Number) });
    // The gateway called the platform's endpoint, which called the provider: the model saw it.
    const lastCall = openai.state.calls.at(-1)?.body as { messages: Array<{ content: unknown }> };
    expect(JSON.stringify(lastCall.messages)).toContain("Hi there");

    // Without sessionId and without action, chat continues the active session.
    t = Date.now();
    const second = await postAgent({ message: "And again" });
    timings.secondChatMs = Date.now() - t;
    expect(second.json).toMatchObject({ sessionId, reply: REPLY });
    // No channel is set up, so no channel plugin was loaded for the turns' tools: OpenClaw
    // copied none into the state (WhatsApp's was ~80 MB there; decision 0189).
    const captures = await bench!.rt.exec(instance.container_name, [
      "sh",
      "-c",
      `find ${STATE_DIR}/tmp -name package.json | wc -l`,
    ]);
    expect(captures).toMatchObject({ exitCode: 0, stdout: "0\n" });

    const full = await getAgent(`?action=session&sessionId=${encodeURIComponent(sessionId)}`);
    expect(full.status).toBe(200);
    expect(full.json).toMatchObject({ id: sessionId, status: "active", messageCount: 4 });
    expect(full.json.messages.map((m: { role: string; content: string }) => m.content)).toEqual([
      "Hi there",
      REPLY,
      "And again",
      REPLY,
    ]);

    const memory = await getAgent("?action=memory");
    expect(memory.json.memory).toEqual([
      { role: "user", content: "Hi there" },
      { role: "assistant", content: REPLY.slice(0, 100) },
      { role: "user", content: "And again" },
      { role: "assistant", content: REPLY.slice(0, 100) },
    ]);

    // Recorded in the platform's store (after the reply), once each, on the web platform.
    await flushRecords();
    const { messages, total } = await listMessages(agentId, { limit: 50, offset: 0 });
    expect(total).toBe(4);
    expect(messages.map((m) => [m.sender, m.platform])).toEqual([
      ["agent", "web"],
      ["user", "web"],
      ["agent", "web"],
      ["user", "web"],
    ]);
    const counted = await getAgent("?action=sessions");
    expect(counted.json.sessions.find((s: { id: string }) => s.id === sessionId)).toMatchObject({
      messageCount: 4,
    });
  }, 240_000);

  it("answers 404 for unknown sessions and 400 for invalid requests", async () => {
    expect((await getAgent("?action=session&sessionId=agent:main:nope")).status).toBe(404);
    expect((await getAgent("?action=session&sessionId=agent:other:x")).status).toBe(404);
    expect((await postAgent({ message: "x", sessionId: "agent:main:nope" })).status).toBe(404);
    const missingId = await getAgent("?action=session");
    expect(missingId).toMatchObject({ status: 400, json: { error: "sessionId is required" } });
    expect((await getAgent("?action=dance")).status).toBe(400);
    expect((await postAgent({ action: "dance" })).status).toBe(400);
    expect((await postAgent({ action: "chat" })).json).toEqual({ error: "message is required" });
    expect((await postAgent({ action: "update-skill", enabled: true })).status).toBe(400);
    expect((await postAgent({ action: "update-skill", skillId: "x" })).status).toBe(400);
    const badKey = await postAgent({ action: "set-credential", key: "aws", value: "v" });
    expect(badKey.status).toBe(400);
    expect(badKey.json.error).toMatch(/openai/);
    expect((await postAgent({ action: "set-credential", key: "openai" })).status).toBe(400);
    expect((await call(agentRoute, "/api/agent")).status).toBe(401);
    expect((await call(chatRoute, "/api/chat")).status).toBe(401);
  });

  it("sends messages through /api/chat and lists them", async () => {
    const sent = await call(chatRoute, "/api/chat", {
      method: "POST",
      body: { message: "Through the chat endpoint", topic: "support" },
      headers: await auth(),
    });
    expect(sent.status).toBe(200);
    expect(sent.json).toEqual({
      id: expect.stringMatching(/^chat_/),
      message: "Through the chat endpoint",
      topic: "support",
      status: "sent",
      timestamp: expect.any(String),
      reply: REPLY,
    });
    const missing = await call(chatRoute, "/api/chat", {
      method: "POST",
      body: { topic: "x" },
      headers: await auth(),
    });
    expect(missing).toMatchObject({ status: 400, json: { error: "message is required" } });
    const listed = await call(chatRoute, "/api/chat", { headers: await auth() });
    expect(listed.json).toEqual({ messages: [sent.json], count: 1 });
    // Another user sees none of it.
    const other = await call(chatRoute, "/api/chat", { headers: await auth("usr_talk_other") });
    expect(other.json).toEqual({ messages: [], count: 0 });
  }, 120_000);

  it("lists skills and toggles one", async () => {
    const skills = await getAgent("?action=skills");
    expect(skills.status).toBe(200);
    expect(skills.json.skills.length).toBeGreaterThan(0);
    const skill = skills.json.skills.find((s: { enabled: boolean }) => s.enabled);
    expect(skill).toMatchObject({ id: expect.any(String), name: expect.any(String) });

    const off = await postAgent({ action: "update-skill", skillId: skill.id, enabled: false });
    expect(off.json).toEqual({ success: true, skillId: skill.id, enabled: false });
    const after = await getAgent("?action=skills");
    expect(after.json.skills.find((s: { id: string }) => s.id === skill.id).enabled).toBe(false);
    const on = await postAgent({ action: "update-skill", skillId: skill.id, enabled: true });
    expect(on.json.enabled).toBe(true);
    const back = await getAgent("?action=skills");
    expect(back.json.skills.find((s: { id: string }) => s.id === skill.id).enabled).toBe(true);
    const unknown = await postAgent({ action: "update-skill", skillId: "no-such", enabled: true });
    expect(unknown.status).toBe(404);
  }, 60_000);

  it("keeps heartbeat settings in the gateway's config and memory in the agent's MEMORY.md", async () => {
    const headers = await auth();
    const heartbeat = (method: string, body?: unknown) =>
      call(heartbeatRoute, "/api/heartbeat", { method, headers, ...(body ? { body } : {}) });
    const gateway = async <T>(method: string, params: unknown = {}) => {
      const { client } = await connectPaired(instance, instance.gateway_address as string);
      try {
        return await client.request<T>(method, params);
      } finally {
        client.close();
      }
    };
    type Config = { config?: { agents?: { defaults?: { heartbeat?: unknown } } } };

    // A new gateway starts without a recurring heartbeat (a billed turn nobody asked for).
    const before = await heartbeat("GET");
    expect(before.status).toBe(200);
    expect(before.json).toMatchObject({
      heartbeat: { every: "0m", enabled: false, target: "owner" },
      configured: { every: "0m" },
    });
    const settings = {
      every: "2h",
      target: "none",
      activeHours: { start: "08:00", end: "22:00", timezone: "Europe/London" },
      isolatedSession: true,
    };
    const set = await heartbeat("POST", settings);
    expect(set.status).toBe(200);
    expect(set.json.heartbeat).toMatchObject({ ...settings, enabled: true, prompt: null });
    // The gateway took it (its own schema validation passed) and reports it in config.get.
    const after = await gateway<Config>("config.get");
    expect(after.config?.agents?.defaults?.heartbeat).toEqual(settings);
    expect(set.json.configured).toEqual(settings);
    const reset = await heartbeat("DELETE");
    expect(reset.status).toBe(200);
    expect(reset.json.configured).toEqual({ every: "0m" });
    expect((await gateway<Config>("config.get")).config?.agents?.defaults?.heartbeat).toEqual({
      every: "0m",
    });

    const remember = (content: string) =>
      call(memoryRoute, "/api/memory", { method: "POST", headers, body: { content } });
    expect((await remember("The user's cat is called Miso.")).status).toBe(200);
    const stored = await remember("Miso likes tuna.");
    expect(stored.json).toMatchObject({ mode: "append", agentId });
    const file = await gateway<{ file?: { content?: string } }>("agents.files.get", {
      agentId: "main",
      name: "MEMORY.md",
    });
    expect(file.file?.content).toBe("The user's cat is called Miso.\n\nMiso likes tuna.\n");
    const read = await call(memoryRoute, `/api/memory?agentId=${agentId}`, { headers });
    expect(read.json).toMatchObject({ agentId, content: file.file?.content });
    expect(read.json.updatedAt).toEqual(expect.any(Number));
    // Leave the agent's memory empty for the tests after this one.
    const cleared = await call(memoryRoute, "/api/memory", {
      method: "POST",
      headers,
      body: { content: "", mode: "replace" },
    });
    expect(cleared.json.content).toBe("");
  }, 120_000);

  it("sets credentials: provider keys in the AI layer, channel tokens in the gateway", async () => {
    const before = await getAgent("?action=credentials");
    expect(before.json).toEqual({
      credentials: {
        openai: false,
        anthropic: false,
        google: false,
        openrouter: false,
        chatapp1: false,
        chatapp2: false,
        chatapp3: false,
      },
    });
    const key = "sk-user-own-openai-key-123456";
    const set = await postAgent({ action: "set-credential", key: "openai", value: key });
    expect(set.json).toEqual({ success: true, key: "openai", configured: true });
    const [stored] = await db()`select sealed_key from ai_user_keys where user_id = ${USER}`;
    expect(String(stored?.sealed_key)).not.toContain(key);

    // The next chat reaches the provider with the user's own key; the gateway never had it.
    openai.state.apiKey = key; // the provider accepts only the user's key from now on
    const reply = await postAgent({ message: "Using my key" });
    expect(reply.json).toMatchObject({ reply: REPLY });
    expect(openai.state.calls.at(-1)?.headers.get("authorization")).toBe(`Bearer ${key}`);

    const token = "123456789:AAHtelegramTokenForTests";
    const tg = await postAgent({ action: "set-credential", key: "chatapp1", value: token });
    expect(tg.status).toBe(200);
    const [channel] = await db()`select sealed from channel_credentials where user_id = ${USER}`;
    expect(String(channel?.sealed)).not.toContain(token);
    const { client } = await connectPaired(instance, instance.gateway_address as string);
    try {
      const cfg = await client.request<{ config?: { channels?: { telegram?: unknown } } }>(
        "config.get",
      );
      expect(cfg.config?.channels?.telegram).toMatchObject({ enabled: true });
      // No provider key anywhere in the gateway's config.
      expect(JSON.stringify(cfg)).not.toContain(key);
    } finally {
      client.close();
    }
    const after = await getAgent("?action=credentials");
    expect(after.json.credentials).toMatchObject({ openai: true, chatapp1: true, chatapp2: false });
  }, 180_000);

  it("serves the chat page: a plain form post chats, the page shows it", async () => {
    const url = `http://localhost/agents/${agentId}/chat`;
    const headers = await auth();
    const form = new URLSearchParams({ intent: "chat", message: "From the form" });
    const posted = await chatPage.action({
      request: new Request(url, { method: "POST", headers, body: form }),
      params: { id: agentId },
      context: {},
    });
    const result = (posted as { data?: unknown }).data ?? posted;
    expect(result).toMatchObject({ error: null, value: { reply: REPLY } });
    const sessionId = (result as { value: { sessionId: string } }).value.sessionId;
    const page = (await chatPage.loader({
      request: new Request(`${url}?session=${encodeURIComponent(sessionId)}`, { headers }),
      params: { id: agentId },
      context: {},
    })) as Awaited<ReturnType<typeof chatPage.loader>>;
    expect(page.sessions.map((s) => s.id)).toContain(sessionId);
    expect(page.messages.map((m) => m.content)).toContain("From the form");
    expect(page.memory.at(-1)).toEqual({ role: "assistant", content: REPLY.slice(0, 100) });
    // Skills and keys have their own tabs; the skills tab shows what can work here by default.
    const tab = async (module: typeof skillsTab | typeof channelsTab, path: string) =>
      module.loader({
        request: new Request(`http://localhost/agents/${agentId}/${path}`, { headers }),
        params: { id: agentId },
        context: {},
      });
    const usable = (await tab(skillsTab, "skills")) as Awaited<ReturnType<typeof skillsTab.loader>>;
    const all = (await tab(skillsTab, "skills?all=1")) as typeof usable;
    expect(all.skills.length).toBeGreaterThan(0);
    expect(usable.skills.every((s) => s.eligible || s.enabled)).toBe(true);
    expect(usable.hidden).toBe(all.skills.length - usable.skills.length);
    expect(all.hidden).toBe(0);
    const keys = (await tab(channelsTab, "channels")) as Awaited<
      ReturnType<typeof channelsTab.loader>
    >;
    expect(Object.keys(keys.credentials)).toHaveLength(7);
    // Another user's agent is not found.
    const other = await chatPage
      .loader({
        request: new Request(url, { headers: await auth("usr_talk_other") }),
        params: { id: agentId },
        context: {},
      })
      .catch((e: unknown) => e);
    expect((other as Response).status).toBe(404);
  }, 120_000);

  it("streams a chat over the live agent socket, and refuses strangers", async () => {
    const url = `ws://${base}/agent/${USER}`;
    const live = openSocket(url, await auth());
    const t = Date.now();
    live.ws.on("open", () =>
      live.ws.send(JSON.stringify({ type: "chat", id: "m1", message: "Stream it" })),
    );
    await expect
      .poll(() => live.frames.find((f) => f.type === "final" || f.type === "error"), {
        timeout: 120_000,
        interval: 100,
      })
      .toMatchObject({ type: "final", id: "m1", reply: REPLY });
    timings.socketChatMs = Date.now() - t;
    expect(live.frames[0]).toEqual({ type: "ready", userId: USER });
    const deltas = live.frames.filter((f) => f.type === "delta").map((f) => f.text);
    expect(deltas.length).toBeGreaterThan(0);
    expect(deltas.join("")).toBe(REPLY);
    expect(live.frames.some((f) => f.type === "event" && f.event === "agent")).toBe(true);
    // Another agent id than the user's own is not found.
    live.ws.send(JSON.stringify({ type: "chat", id: "m2", message: "x", agentId: "agt_nope" }));
    await expect
      .poll(() => live.frames.find((f) => f.id === "m2"))
      .toMatchObject({ type: "error", status: 404 });
    live.ws.close();

    // API keys work too.
    const { key } = await createApiKey(USER, "socket");
    const byKey = openSocket(url, { authorization: `Bearer ${key}` });
    await expect.poll(() => byKey.frames[0]).toEqual({ type: "ready", userId: USER });
    byKey.ws.close();

    expect((await openSocket(url, {}).closed).code).toBe(4401);
    expect((await openSocket(url, { authorization: "Bearer sk_wrong" }).closed).code).toBe(4401);
    const other = openSocket(`ws://${base}/agent/usr_talk_other`, await auth());
    expect((await other.closed).code).toBe(4404);
    const foreign = openSocket(url, { ...(await auth()), origin: "https://evil.example" });
    expect((await foreign.closed).code).toBe(4403);
  }, 180_000);

  // Last, as it empties the owner's balance (decision 0155): the platform's AI endpoint answers
  // 402 in words OpenClaw treats as a passing usage limit, so the chat shows "out of credits"
  // and the provider is not disabled; credits granted right after make the very next chat
  // answer. (The platform's added latency per turn is measured in `npm run bench`, bench/talk.ts.)
  it("says out of credits in the chat, and answers at once when credits arrive", async () => {
    // Back on the platform's credits: the user's own provider key (set above) is removed.
    await removeUserKeys(USER);
    openai.state.apiKey = "test-key";
    await flushMetering();
    await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference)
      select 'led_talk_spent', ${USER}, -coalesce(sum(amount_micro_usd), 0), 'test spend', 'led_talk_spent'
      from credit_ledger where user_id = ${USER}`;
    expect(await balanceOf(USER)).toBe(0);
    const callsBefore = openai.state.calls.length;
    aiStatuses.length = 0;
    // Listening on the gateway as the platform does: what its chat channels would be sent.
    const { client } = await connectPaired(instance, instance.gateway_address as string);
    const errors: string[] = [];
    client.onEvent((event, payload) => {
      const p = payload as { state?: string; errorMessage?: string };
      if (event === "chat" && p.state === "error" && p.errorMessage) errors.push(p.errorMessage);
    });
    try {
      const refused = await postAgent({ message: "Hello?" });
      expect(refused.status, refused.text).toBe(402);
      expect(refused.json.error).toMatch(/^Out of credits: .*Add credits on the Billing page/);
      // A run OpenClaw ended with a transient error first (state-database contention) is sent
      // again by the platform: the refusal is the error of the run that reached the endpoint.
      const refusal = () => errors.find((e) => e.includes("Out of credits"));
      await expect.poll(refusal).toMatch(/^⚠️ "?Out of credits: the usage limit/);
      // No retry loop (OpenClaw may make one follow-up call after a failed turn).
      expect(aiStatuses.length).toBeGreaterThan(0);
      expect(aiStatuses.length).toBeLessThanOrEqual(2);
      expect(aiStatuses.every((s) => s === 402)).toBe(true);
    } finally {
      client.close();
    }
    // The provider was never asked for a completion: nothing to pay it with. (Its model list
    // may be read: the catalog refreshes it.)
    const completions = () =>
      openai.state.calls.slice(callsBefore).filter((c) => c.url.endsWith("/chat/completions"));
    expect(completions()).toHaveLength(0);

    await giveCredits(USER, 5_000_000, "led_talk_regrant");
    const refusedCalls = aiStatuses.length;
    const answered = await postAgent({ message: "Hello again" });
    expect(answered.status, answered.text).toBe(200);
    expect(answered.json.reply).toBe(REPLY);
    // "At once": the gateway went straight to the endpoint (a disabled provider would have been
    // refused inside the gateway without a call), and nothing was refused after the grant.
    expect(aiStatuses.slice(refusedCalls)).toContain(200);
    expect(aiStatuses.slice(refusedCalls)).not.toContain(402);
    expect(completions().length).toBeGreaterThan(0);
  }, 240_000);
});

describe("without a reachable gateway", () => {
  it("answers 404 without an instance and 502 when the gateway does not answer", async () => {
    expect((await getAgent("?action=health", "usr_talk_none")).status).toBe(404);
    expect((await postAgent({ message: "hi" }, "usr_talk_none")).status).toBe(404);
    await ensureUser("usr_talk_down");
    const row = await ensureInstanceRecord("usr_talk_down", { plan: "solo" });
    await updateInstance(row.id, {
      gateway_address: "127.0.0.1:9",
      device_private_key_sealed: seal(generateDeviceIdentity().privateKeyPem),
      paired_at: new Date(),
      observed_state: "running",
    });
    const down = await getAgent("?action=health", "usr_talk_down");
    expect(down.status).toBe(502);
    expect(down.json.error).toMatch(/gateway/i);
    expect((await postAgent({ message: "hi" }, "usr_talk_down")).status).toBe(502);
    // A channel token the gateway cannot take is not kept; without an instance it is stored
    // for the worker to apply at provisioning.
    const token = { action: "set-credential", key: "chatapp1", value: "1:AAtoken" };
    expect((await postAgent(token, "usr_talk_down")).status).toBe(502);
    const down2 = await getAgent("?action=credentials", "usr_talk_down");
    expect(down2.json.credentials.chatapp1).toBe(false);
    expect((await postAgent(token, "usr_talk_none")).status).toBe(200);
    const none = await getAgent("?action=credentials", "usr_talk_none");
    expect(none.json.credentials.chatapp1).toBe(true);
  });
});
