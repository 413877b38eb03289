import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as listRoute from "../../app/routes/agents._index.tsx";
import * as agentRoute from "../../app/routes/agents.$id._index.tsx";
import * as liveRoute from "../../app/routes/agents.$id.live.ts";
import * as logsRoute from "../../app/routes/agents.$id.logs.tsx";
import * as settingsRoute from "../../app/routes/agents.$id.settings.tsx";
import { recordMessages } from "../../app/server/agents/agent-messages.server.ts";
import { getOwnedAgent } from "../../app/server/agents/agents.server.ts";
import { setUserKey } from "../../app/server/ai/byok.server.ts";
import { setAgentVerification } from "../../app/server/identity/verification.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { consume, resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { configureAi } from "../ai/support.ts";
import { context, page } from "../helpers/pages.ts";
import { agentUser } from "./support.ts";

// The dashboard pages' loaders and actions (no browser, no Docker): sign-in redirects,
// ownership (another user's agent is "not found"), the provision form's 402/429 answers, the
// configuration editor's validation, messages paging, verification removal, the live route.

type Who = { cookie: string };

async function provisionThroughPage(who: Who, name = "Scout") {
  const res = await page(listRoute, "/agents?index", who, { name, model: "custom" });
  expect(res.status).toBe(303);
  const id = /^\/agents\/(agt_\w+)\?notice=provisioned$/.exec(res.location ?? "")?.[1];
  expect(id).toBeDefined();
  return id as string;
}

beforeAll(() => {
  // No worker runs here: provisioning must not wait for the instance it enqueues.
  process.env.AGENT_PROVISION_WAIT_MS = "0";
  resetEnvCache();
});
beforeEach(() => resetRateLimiters());

describe("agents list page", () => {
  it("sends a signed-out visitor to sign in and back", async () => {
    const res = await page(listRoute, "/agents", undefined);
    expect(res.status).toBe(302);
    expect(res.location).toBe("/signin?redirectTo=%2Fagents");
  });

  it("without a subscription: no form offered, and a post is refused with 402 on the form", async () => {
    const who = await agentUser();
    const shown = await page(listRoute, "/agents", who);
    expect(shown.body).toMatchObject({ agents: [], subscribed: false, tier: null, tiers: [] });
    const res = await page(listRoute, "/agents?index", who, { name: "Scout", model: "custom" });
    expect(res.status).toBe(402);
    expect(res.body).toMatchObject({
      result: { error: { "": [expect.stringMatching(/active subscription/)] } },
    });
  });

  it("provisions through the API's service, then answers 429 at the starter tier's limit", async () => {
    const who = await agentUser("solo");
    const before = await page(listRoute, "/agents", who);
    expect(before.body).toMatchObject({
      subscribed: true,
      tier: "starter",
      tiers: [{ id: "starter", limit: 1 }],
      limit: 1,
      models: expect.arrayContaining([{ id: "custom", name: expect.any(String) }]),
    });

    // Validation first: an empty name is a field error (400), nothing is created.
    const empty = await page(listRoute, "/agents?index", who, { name: " ", model: "custom" });
    expect(empty.status).toBe(400);
    expect(empty.body).toMatchObject({ result: { error: { name: ["Name is required"] } } });

    const id = await provisionThroughPage(who);
    const after = await page(listRoute, "/agents", who);
    expect(after.body).toMatchObject({
      agents: [{ id, name: "Scout", model: "custom", status: "provisioning" }],
    });

    const over = await page(listRoute, "/agents?index", who, { name: "Two", model: "custom" });
    expect(over.status).toBe(429);
    expect(over.body).toMatchObject({
      result: { error: { "": [expect.stringMatching(/starter tier allows 1 agent/)] } },
    });
  });
});

describe("agent page", () => {
  it("is not found for another user, and the live route too", async () => {
    const owner = await agentUser("solo");
    const id = await provisionThroughPage(owner);
    const intruder = await agentUser("solo");
    const viewed = await page(agentRoute, `/agents/${id}`, intruder, undefined, { id });
    expect(viewed.status).toBe(404);
    const acted = await page(agentRoute, `/agents/${id}`, intruder, { intent: "stop" }, { id });
    expect(acted.status).toBe(404);
    const saved = await page(
      settingsRoute,
      `/agents/${id}/settings`,
      intruder,
      { intent: "config", config: "{}" },
      { id },
    );
    expect(saved.status).toBe(404);
    const live = await page(liveRoute, `/agents/${id}/live`, intruder, undefined, { id });
    expect(live.status).toBe(404);
    const anonymous = await page(liveRoute, `/agents/${id}/live`, undefined, undefined, { id });
    expect(anonymous.status).toBe(401);

    const own = await page(liveRoute, `/agents/${id}/live`, owner, undefined, { id });
    expect(own.status).toBe(200);
    expect(JSON.parse(own.body as string)).toMatchObject({
      status: "provisioning",
      statsStatus: "mock",
      stats: { agentId: id, messagesProcessed: 0 },
      lastError: null,
      at: expect.any(String),
    });
  });

  it("shows detail, pages messages, and says logs need a running gateway", async () => {
    const who = await agentUser("solo");
    const id = await provisionThroughPage(who);
    const agent = await getOwnedAgent(who.id, id);
    await recordMessages(
      agent,
      "agent:main:web:s1",
      Array.from({ length: 5 }, (_, i) => ({
        sender: i % 2 ? ("agent" as const) : ("user" as const),
        content: `message ${i}`,
        timestamp: new Date(Date.UTC(2026, 0, 1, 0, i)),
        dedupeKey: `s1:${i}`,
      })),
    );
    const res = await page(
      agentRoute,
      `/agents/${id}?limit=2&offset=2&level=error`,
      who,
      undefined,
      {
        id,
      },
    );
    expect(res.status).toBe(200);
    const body = res.body as Awaited<ReturnType<typeof agentRoute.loader>>;
    expect(body.agent).toMatchObject({
      id,
      name: "Scout",
      tier: "starter",
      status: "provisioning",
    });
    expect(body.messages).toMatchObject({ total: 5, limit: 2, offset: 2 });
    // Newest first: offset 2 of messages 4..0 is messages 2 and 1.
    expect(body.messages.messages.map((m) => m.content)).toEqual(["message 2", "message 1"]);
    // Logs have their own tab.
    const logs = await page(logsRoute, `/agents/${id}/logs?level=error`, who, undefined, { id });
    expect((logs.body as { logs: unknown }).logs).toEqual({
      logs: [],
      total: 0,
      unavailable: expect.stringMatching(/while it runs/),
      level: "error",
    });
    expect(body.verification).toMatchObject({ verified: false });
    // Out-of-range paging falls back to the defaults instead of failing the page.
    const odd = await page(
      agentRoute,
      `/agents/${id}?limit=500&offset=-3&level=loud`,
      who,
      undefined,
      {
        id,
      },
    );
    expect((odd.body as typeof body).messages).toMatchObject({ limit: 50, offset: 0 });
    const oddLogs = await page(logsRoute, `/agents/${id}/logs?level=loud`, who, undefined, { id });
    expect((oddLogs.body as { logs: { level: unknown } }).logs.level).toBeNull();
  });

  it("removes a verification, checks the EAS form, and refuses unknown intents", async () => {
    const who = await agentUser("solo");
    const id = await provisionThroughPage(who);
    await setAgentVerification(id, {
      verificationType: "eas",
      attestationUid: `0x${"ab".repeat(32)}`,
      verifierAddress: null,
      metadata: null,
    });
    const shown = await page(agentRoute, `/agents/${id}`, who, undefined, { id });
    expect((shown.body as { verification: unknown }).verification).toMatchObject({
      verified: true,
      verificationType: "eas",
    });
    const removed = await page(agentRoute, `/agents/${id}`, who, { intent: "unverify" }, { id });
    expect(removed.location).toBe(`/agents/${id}?notice=unverified`);
    const again = await page(agentRoute, `/agents/${id}`, who, undefined, { id });
    expect((again.body as { verification: unknown }).verification).toMatchObject({
      verified: false,
    });
    // The panel's EAS form: a malformed UID is refused before the chain is asked.
    const malformed = await page(
      agentRoute,
      `/agents/${id}`,
      who,
      { intent: "verify-eas", attestationUid: "0x1234" },
      { id },
    );
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatchObject({ error: expect.stringMatching(/64 hexadecimal/) });
    const intruder = await agentUser("solo");
    const foreign = await page(
      agentRoute,
      `/agents/${id}`,
      intruder,
      { intent: "verify-eas", attestationUid: `0x${"cd".repeat(32)}` },
      { id },
    );
    expect(foreign.status).toBe(404);
    expect((again.body as { securityKeyIds: string[] }).securityKeyIds).toEqual([]);

    const unknown = await page(agentRoute, `/agents/${id}`, who, { intent: "explode" }, { id });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ error: "Unknown action" });
  });

  it("shows a lifecycle failure on the page (no worker answers: 502) instead of an error page", async () => {
    process.env.INSTANCE_ACTION_TIMEOUT_MS = "200";
    resetEnvCache();
    try {
      const who = await agentUser("solo");
      const id = await provisionThroughPage(who);
      const res = await page(agentRoute, `/agents/${id}`, who, { intent: "stop" }, { id });
      expect(res.status).toBe(502);
      expect(res.body).toMatchObject({ error: "Instance backend unavailable", value: null });
    } finally {
      delete process.env.INSTANCE_ACTION_TIMEOUT_MS;
      resetEnvCache();
    }
  });

  it("counts lifecycle posts against the user's instance budget (30/min, shared with the API)", async () => {
    const who = await agentUser("solo");
    const id = await provisionThroughPage(who);
    for (let i = 0; i < 30; i++) await consume("instance", `user:${who.id}`);
    const res = await page(agentRoute, `/agents/${id}`, who, { intent: "start" }, { id });
    expect(res.status).toBe(429);
    expect(res.body).toMatchObject({ error: "Too many requests: limit is 30 per 60 seconds" });
  });

  it("refuses a cross-site post", async () => {
    const who = await agentUser("solo");
    const request = new Request("http://localhost/agents?index", {
      method: "POST",
      headers: {
        cookie: who.cookie,
        origin: "https://evil.example",
        "content-type": "application/x-www-form-urlencoded",
      },
      body: "name=x&model=custom",
    });
    const thrown = await listRoute.action({ request, params: {}, context }).catch((e) => e);
    expect((thrown as Response).status).toBe(403);
  });
});

describe("the agent page names the model source", () => {
  it("says which source is missing, that credits are, or which one serves", async () => {
    const who = await agentUser("solo");
    const id = await provisionThroughPage(who);
    const shown = async () => {
      const res = await page(agentRoute, `/agents/${id}`, who, undefined, { id });
      expect(res.status).toBe(200);
      return (res.body as Awaited<ReturnType<typeof agentRoute.loader>>).modelSource;
    };
    try {
      // Nothing at all: no server key, no local server, no key of the user's.
      await configureAi({});
      const none = await shown();
      expect(none.problem?.kind).toBe("no-provider");
      expect(none.problem?.message).toMatch(/OPENAI_API_KEY.*OPENAI_BASE_URL.*no key of your own/);

      // A local OpenAI-compatible server needs neither keys nor credits.
      await configureAi({ OPENAI_BASE_URL: "http://127.0.0.1:11434/v1" });
      expect(await shown()).toMatchObject({
        problem: null,
        platform: [{ provider: "openai", local: true }],
      });

      // A server key is paid from credits: none yet.
      await configureAi({ ANTHROPIC_API_KEY: "test-key" });
      const broke = await shown();
      expect(broke.problem).toMatchObject({ kind: "no-credits" });
      expect(broke.problem?.message).toMatch(/anthropic/);

      // The user's own key serves without credits.
      await setUserKey(who.id, "anthropic", "sk-ant-test-key-1234");
      expect(await shown()).toMatchObject({ problem: null, ownKeys: ["anthropic"] });
    } finally {
      await configureAi({});
    }
  });
});
