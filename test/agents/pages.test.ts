import type { AppLoadContext } from "@remix-run/node";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as listRoute from "../../app/routes/agents._index.tsx";
import * as agentRoute from "../../app/routes/agents.$id._index.tsx";
import * as liveRoute from "../../app/routes/agents.$id.live.ts";
import { CONFIG_MAX_BYTES, configFormSchema } from "../../app/schemas/agents.ts";
import { recordMessages } from "../../app/server/agents/agent-messages.server.ts";
import { getOwnedAgent } from "../../app/server/agents/agents.server.ts";
import { setUserKey } from "../../app/server/ai/byok.server.ts";
import { setAgentVerification } from "../../app/server/identity/verification.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { consume, resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { configureAi } from "../ai/support.ts";
import { agentUser } from "./support.ts";

// The dashboard pages' loaders and actions (no browser, no Docker): sign-in redirects,
// ownership (another user's agent is "not found"), the provision form's 402/429 answers, the
// configuration editor's validation, messages paging, verification removal, the live route.

type Who = { cookie: string };
const context = { remoteAddress: "127.0.0.1" } as AppLoadContext;

/** Runs a loader (GET) or action (POST form) as the browser would; thrown Responses returned. */
async function page(
  module: { loader: unknown; action?: unknown },
  path: string,
  who: Who | undefined,
  form?: Record<string, string>,
  params: Record<string, string> = {},
): Promise<{ status: number; location: string | null; body: unknown }> {
  const headers = new Headers();
  if (who) headers.set("cookie", who.cookie);
  let body: URLSearchParams | undefined;
  if (form) {
    body = new URLSearchParams(form);
    headers.set("origin", "http://localhost");
    headers.set("content-type", "application/x-www-form-urlencoded");
  }
  const request = new Request(new URL(path, "http://localhost"), {
    method: form ? "POST" : "GET",
    headers,
    body,
  });
  const fn = (form ? module.action : module.loader) as (args: unknown) => Promise<unknown>;
  let result: unknown;
  try {
    result = await fn({ request, params, context });
  } catch (thrown) {
    result = thrown;
  }
  if (result instanceof Response) {
    const text = await result.text();
    return { status: result.status, location: result.headers.get("location"), body: text };
  }
  // data(...) from an action: { type: "DataWithResponseInit", data, init }
  const wrapped = result as { type?: string; data?: unknown; init?: { status?: number } };
  if (wrapped?.type === "DataWithResponseInit") {
    return { status: wrapped.init?.status ?? 200, location: null, body: wrapped.data };
  }
  return { status: 200, location: null, body: result };
}

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
      agentRoute,
      `/agents/${id}`,
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
    expect(body.logs).toEqual({
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
    expect((odd.body as typeof body).logs.level).toBeNull();
  });

  it("saves a valid configuration and refuses what is not a JSON object or too large", async () => {
    const who = await agentUser("solo");
    const id = await provisionThroughPage(who);
    const save = (config: string) =>
      page(agentRoute, `/agents/${id}`, who, { intent: "config", config }, { id });

    for (const [text, message] of [
      ["{ nope", /Not valid JSON/],
      ["[1, 2]", /must be a JSON object/],
      ["42", /must be a JSON object/],
      [JSON.stringify({ blob: "x".repeat(CONFIG_MAX_BYTES) }), /larger than 64 KiB/],
    ] as const) {
      const res = await save(text);
      expect(res.status, text.slice(0, 20)).toBe(400);
      expect(res.body).toMatchObject({
        result: { error: { config: [expect.stringMatching(message)] } },
      });
    }
    // Indentation does not count against the cap (it is measured as compact JSON, like the API).
    const roomy = `{\n${" ".repeat(CONFIG_MAX_BYTES)}"identity": {"name": "Scout"}\n}`;
    expect(configFormSchema.safeParse({ config: roomy }).success).toBe(true);

    const before = await getOwnedAgent(who.id, id);
    const ok = await save(JSON.stringify({ identity: { name: "Scout" }, notes: "mine" }, null, 2));
    expect(ok.status).toBe(303);
    expect(ok.location).toBe(`/agents/${id}?notice=config`);
    const after = await getOwnedAgent(who.id, id);
    expect(after.config).toEqual({ identity: { name: "Scout" }, notes: "mine" });
    expect(after.config_revision).toBe(before.config_revision + 1);
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
