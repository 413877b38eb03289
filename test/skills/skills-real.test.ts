import { afterAll, beforeAll, expect, it } from "vitest";
import * as agentRoute from "../../app/routes/api.agent.ts";
import * as skillRoute from "../../app/routes/api.skills.$name.ts";
import * as skillsRoute from "../../app/routes/api.skills.ts";
import { getInstance, type InstanceRow } from "../../app/server/agents/instances.server.ts";
import { flushRecords } from "../../app/server/agents/talk.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { approveSkill, pendingVersions } from "../../app/server/skills/publishing.server.ts";
import { runAction } from "../../worker/instances/actions.ts";
import { observe } from "../../worker/instances/observe.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { giveCredits } from "../ai/support.ts";
import { call } from "../helpers/api.ts";
import {
  type GatewayBench,
  provisionRealGateway,
  startGatewayBench,
  stopGatewayBench,
  userTexts,
} from "../helpers/real-gateway.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { describeDocker, waitFor } from "../runtime/docker-support.ts";
import { skillMd } from "./support.ts";

// The marketplace against the real OpenClaw gateway (one gateway for the whole file): a shipped
// skill installed, eligible in skills.status, used through POST /api/skills/:name (the model is
// the platform's AI endpoint answered by msw, which tells whether the skill reached it), kept
// across a restart; another user's published skill approved, installed, updated and removed;
// unmet requirements refused; a stopped gateway answers 502.

const openai = createOpenAiFake();
const USER = "usr_skills_owner";
const PUBLISHER = "usr_skills_publisher";
const AGENT = "agt_skillsowner00000000";
let bench: GatewayBench | undefined;
let instance: InstanceRow;
const timings: Record<string, number> = {};

const headers = async (userId = USER) => ({ cookie: await sessionCookieFor(userId) });
const skills = async (body: unknown, userId = USER) =>
  call(skillsRoute, "/api/skills", { method: "POST", body, headers: await headers(userId) });
const catalog = async (query: string) =>
  call(skillsRoute, `/api/skills${query}`, { headers: await headers() });
const use = async (name: string, body: unknown) =>
  call(skillRoute, `/api/skills/${name}`, {
    method: "POST",
    params: { name },
    body,
    headers: await headers(),
  });
/** The gateway's own view (skills.status through GET /api/agent?action=skills). */
const gatewaySkill = async (name: string) => {
  const res = await call(agentRoute, "/api/agent?action=skills", { headers: await headers() });
  expect(res.status).toBe(200);
  return (
    res.json.skills as Array<{
      id: string;
      name: string;
      eligible: boolean;
      enabled: boolean;
      description: string;
    }>
  ).find((s) => s.name === name);
};
const timed = async <T>(label: string, fn: () => Promise<T>): Promise<T> => {
  const t0 = Date.now();
  try {
    return await fn();
  } finally {
    timings[label] = Date.now() - t0;
  }
};

/** The newest user request of the turn (earlier turns of the session come before it). */
const latestRequest = (body: Record<string, unknown>) =>
  userTexts(body).findLast((t) => t.includes("User request:")) ?? "";

describeDocker("skills marketplace (real gateway)", () => {
  beforeAll(async () => {
    // The fake model says which skill its prompt told it to use (OpenClaw expands `/<command>`
    // into instructions naming the skill and its SKILL.md).
    openai.state.replyFor = (body) => {
      // The system prompt lists every available skill; a used one is named in the user turn.
      const text = latestRequest(body);
      const used = ["unit-converter", "echo-skill"].find(
        (n) => text.includes("explicitly referenced skill") && text.includes(`- ${n} (SKILL.md:`),
      );
      return used ? `SKILL-USED ${used}` : `NO-SKILL ${text.slice(-300)}`;
    };
    bench = await startGatewayBench({ openai });
    await ensureUser(USER);
    await ensureUser(PUBLISHER);
    await giveCredits(USER, 5_000_000);
    await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
      values (${AGENT}, ${USER}, 'Skilled', 'main', 'openai/gpt-4o-mini', 'starter')`;
    ({ instance, provisionMs: timings.provisionMs } = await provisionRealGateway(USER));
    // Removal deletes the folder through the worker's job.
    await startWorker({ concurrency: 1 });
  }, 300_000);

  afterAll(async () => {
    process.stdout.write(`skills timings ${JSON.stringify(timings)}\n`);
    await flushRecords();
    await stopWorker(5_000);
    await stopGatewayBench(bench);
  });

  it("installs a shipped skill: eligible in skills.status, installed and enabled in the catalog", async () => {
    const res = await timed("installMs", () =>
      skills({ action: "install", name: "unit-converter", agentId: AGENT }),
    );
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.json).toEqual({
      name: "unit-converter",
      agentId: AGENT,
      version: "1.0.0",
      installed: true,
      enabled: true,
    });
    expect(await gatewaySkill("unit-converter")).toMatchObject({ eligible: true, enabled: true });
    const entry = (await catalog("?q=unit-converter")).json.skills[0];
    expect(entry).toMatchObject({
      name: "unit-converter",
      installs: 1,
      agents: [{ agentId: AGENT, installed: true, enabled: true, version: "1.0.0" }],
    });
    // The gateway's bundled skills are in the catalog too, per agent.
    const bundled = await catalog("?source=bundled&limit=100");
    expect(bundled.json.bundledAvailable).toBe(true);
    expect(bundled.json.skills.length).toBeGreaterThan(0);
    expect(bundled.json.skills[0]).toMatchObject({
      source: "bundled",
      publisher: { name: "OpenClaw" },
    });
    expect(
      (await skills({ action: "install", name: "unit-converter", agentId: AGENT })).status,
    ).toBe(409);
  }, 240_000);

  it("uses it: the model is told to use the skill, the reply comes back (and streams)", async () => {
    const res = await timed("useMs", () => use("unit-converter", { input: "3 km in miles" }));
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.json).toMatchObject({
      skill: "unit-converter",
      version: "1.0.0",
      agentId: AGENT,
      sessionId: expect.stringMatching(/^agent:main:/),
      reply: "SKILL-USED unit-converter",
    });
    expect(latestRequest(openai.state.calls.at(-1)?.body as Record<string, unknown>)).toContain(
      "3 km in miles",
    );

    const streamed = await use("unit-converter", { input: "10 lb in kg", stream: true });
    expect(streamed.status).toBe(200);
    expect(streamed.headers.get("content-type")).toMatch(/text\/event-stream/);
    const events = streamed.text
      .split("\n\n")
      .filter(Boolean)
      .map((block) => ({
        event: /^event: (.*)$/m.exec(block)?.[1],
        data: JSON.parse(/^data: (.*)$/m.exec(block)?.[1] ?? "null"),
      }));
    expect(events.at(-1)).toMatchObject({
      event: "done",
      data: { reply: "SKILL-USED unit-converter" },
    });
    // Unknown or not installed: 404.
    expect((await use("memory-notes", { input: "x" })).status).toBe(404);
    expect((await use("no-such-skill", { input: "x" })).status).toBe(404);
  }, 240_000);

  it("keeps the installed skill across a restart", async () => {
    const row = (await getInstance(instance.id)) as InstanceRow;
    await timed("restartMs", async () => {
      await runAction(row, "restart");
      // The gateway takes control connections a while after the restart answers.
      await waitFor(
        async () =>
          (await call(agentRoute, "/api/agent?action=skills", { headers: await headers() }))
            .status === 200,
        { timeoutMs: 240_000, intervalMs: 1_000, what: "the gateway after the restart" },
      );
      // What the worker's sampler does within 10 s (none runs in this file): the row leaves
      // "starting", else the chat below waits for it up to AGENT_CHAT_START_WAIT_MS (120 s).
      await waitFor(async () => (await observe(row)).observed_state === "running", {
        timeoutMs: 120_000,
        what: "the restarted gateway observed running",
      });
    });
    expect(await gatewaySkill("unit-converter")).toMatchObject({ eligible: true, enabled: true });
    expect((await use("unit-converter", { input: "1 mi in km" })).json.reply).toBe(
      "SKILL-USED unit-converter",
    );
  }, 240_000);

  it("installs another user's approved skill, updates it to a new version and removes it", async () => {
    const v1 = skillMd("echo-skill", "1.0.0", "Echo the input back in capitals.");
    expect(
      (await skills({ action: "publish", skillMd: v1, visibility: "public" }, PUBLISHER)).status,
    ).toBe(201);
    // Not approved yet: the user cannot install it.
    expect((await skills({ action: "install", name: "echo-skill", agentId: AGENT })).status).toBe(
      404,
    );
    for (const p of await pendingVersions()) await approveSkill(p.id, "usr_operator");
    const installed = await skills({ action: "install", name: "echo-skill", agentId: AGENT });
    expect(installed.status, JSON.stringify(installed.json)).toBe(200);
    expect((await gatewaySkill("echo-skill"))?.description).toBe("A test skill called echo-skill.");
    expect((await use("echo-skill", { input: "hello" })).json.reply).toBe("SKILL-USED echo-skill");

    const v2 = skillMd("echo-skill", "1.1.0", "Echo the input back reversed.").replace(
      "A test skill called echo-skill.",
      "Echo, second edition.",
    );
    expect(
      (await skills({ action: "publish", skillMd: v2, visibility: "public" }, PUBLISHER)).status,
    ).toBe(201);
    for (const p of await pendingVersions()) await approveSkill(p.id, "usr_operator");
    const agentPage = (await catalog("?name=echo-skill")).json.skill;
    expect(agentPage.agents[0]).toMatchObject({ installed: true, version: "1.0.0" });
    const updated = await timed("updateMs", () =>
      skills({ action: "update", name: "echo-skill", agentId: AGENT }),
    );
    expect(updated.json).toMatchObject({
      version: "1.1.0",
      previousVersion: "1.0.0",
      updated: true,
    });
    await expect
      .poll(async () => (await gatewaySkill("echo-skill"))?.description, { timeout: 15_000 })
      .toBe("Echo, second edition.");

    const removed = await timed("removeMs", () =>
      skills({ action: "remove", name: "echo-skill", agentId: AGENT }),
    );
    expect(removed.status, JSON.stringify(removed.json)).toBe(200);
    expect(await gatewaySkill("echo-skill")).toBeUndefined();
    expect((await catalog("?name=echo-skill")).json.skill.agents[0]).toMatchObject({
      installed: false,
    });
    expect((await use("echo-skill", { input: "x" })).status).toBe(404);
  }, 240_000);

  it("refuses a skill whose requirements the agent does not meet, naming them", async () => {
    const needs = skillMd(
      "needs-tools",
      "1.0.0",
      "Run the tool.",
      'metadata: { "openclaw": { "requires": { "bins": ["definitely-not-a-binary"], "env": ["NEEDS_TOOLS_TOKEN"] } } }\n',
    );
    expect(
      (await skills({ action: "publish", skillMd: needs, visibility: "private" })).status,
    ).toBe(201);
    const res = await skills({ action: "install", name: "needs-tools", agentId: AGENT });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/binary definitely-not-a-binary/);
    expect(res.json.error).toMatch(/environment variable NEEDS_TOOLS_TOKEN/);
    expect(await gatewaySkill("needs-tools")).toBeUndefined();
  }, 240_000);

  it("answers 502 when the gateway is down", async () => {
    await runAction((await getInstance(instance.id)) as InstanceRow, "stop");
    closeGatewayClients();
    expect((await use("unit-converter", { input: "1 m in ft" })).status).toBe(502);
    expect(
      (await skills({ action: "remove", name: "unit-converter", agentId: AGENT })).status,
    ).toBe(502);
  }, 240_000);
});
