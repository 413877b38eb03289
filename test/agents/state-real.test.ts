import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import * as agentRoute from "../../app/routes/api.agent.ts";
import * as exportRoute from "../../app/routes/api.agents.$id.backups.$backupId.export.ts";
import * as restoreRoute from "../../app/routes/api.agents.$id.backups.$backupId.restore.ts";
import * as backupsRoute from "../../app/routes/api.agents.$id.backups.ts";
import * as cloneRoute from "../../app/routes/api.agents.$id.clone.ts";
import * as importRoute from "../../app/routes/api.agents.$id.import.ts";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import * as memoryRoute from "../../app/routes/api.memory.ts";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import { gatewayClientFor } from "../../app/server/agents/instance-gateway.server.ts";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { chat, flushRecords } from "../../app/server/agents/talk.server.ts";
import { revokeInstanceTokens } from "../../app/server/ai/instance-tokens.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { closeDb, db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { stopBoss } from "../../app/server/platform/jobs.server.ts";
import { platformPublicKey } from "../../app/server/platform/signing.server.ts";
import { sendResponse, toRequest } from "../../app/server/platform/web/node-http.server.ts";
import { provision } from "../../worker/instances/provision.ts";
import { updateImage } from "../../worker/instances/update-image.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { configureAi, giveCredits } from "../ai/support.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import {
  allowDockerNetworks,
  buildImage,
  cleanupTestObjects,
  describeDocker,
  GATEWAY_IMAGE,
  removeImages,
  testRun,
} from "../runtime/docker-support.ts";
import { cloneDatabase } from "../setup/cluster.ts";
import { gatewayBuildFinished } from "../setup/gateway-build.ts";
import { agentUser, asUser } from "./support.ts";

// An agent's state through backup, restore, clone, export/import and updates, on the real
// OpenClaw gateway (issue 26). One instance, provisioned on the older release (2026.9.5),
// serves the backup, restore and clone, then is updated to 2026.9.6 and given a broken build;
// a second platform database (another installation, its own sealing key) imports the export.
// The gateway's model provider is the platform's AI endpoint (served here on the bridge
// network's gateway IP) with the AI layer's OpenAI provider answered by msw, so the prompt the
// gateway sends is read from the fake's calls.

const OLDER = "agent-gateway:2026.9.5";
const rt = new DockerRuntime({ maxCpus: 1 });
const openai = createOpenAiFake();
const REPLY = "Noted.";
const LINE = "The user's teapot is called Marmaduke.";
let server: Server;
let owner: { id: string; cookie: string };
let agentId: string;
let row: InstanceRow;
let sessionId: string;

const memoryOf = async (who: { cookie: string }, id: string) =>
  (await asUser(who, memoryRoute, `/api/memory?agentId=${id}`, {})).json.content as string;
const sessionsOf = async (who: { cookie: string }) =>
  (await asUser(who, agentRoute, "/api/agent?action=sessions", {})).json.sessions as Array<{
    id: string;
  }>;
const sessionMessages = async (who: { cookie: string }, id: string) =>
  (
    await asUser(
      who,
      agentRoute,
      `/api/agent?action=session&sessionId=${encodeURIComponent(id)}`,
      {},
    )
  ).json.messages as Array<{ content: string }>;
const version = async (who: { cookie: string }) =>
  (await asUser(who, agentRoute, "/api/agent?action=health", {})).json.version as string;

/** What the model was last sent, as text. */
const lastPrompt = () => JSON.stringify(openai.state.calls.at(-1)?.body ?? {});

async function takeBackup(who: { cookie: string }, id: string): Promise<string> {
  const accepted = await asUser(who, backupsRoute, `/api/agents/${id}/backups`, {
    method: "POST",
    params: { id },
  });
  expect(accepted.status, accepted.text).toBe(202);
  const backupId = accepted.json.backup.id as string;
  const deadline = Date.now() + 300_000;
  for (;;) {
    const list = await asUser(who, backupsRoute, `/api/agents/${id}/backups`, { params: { id } });
    const found = list.json.backups.find((b: { id: string }) => b.id === backupId);
    if (found?.status === "ready") return backupId;
    if (found?.status === "failed") throw new Error(found.error);
    if (Date.now() > deadline) throw new Error("the backup did not become ready");
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** The platform's AI endpoint on the address containers reach. */
async function serveAiEndpoint(gatewayIp: string | undefined) {
  server = createServer(async (req, res) => {
    const request = toRequest(req, res, `http://${req.headers.host}`);
    const handler = req.method === "GET" ? completionsRoute.loader : completionsRoute.action;
    const response = await handler({ request, params: {}, context: {} });
    await sendResponse(res, response, false);
  });
  await new Promise<void>((ok) => server.listen(0, gatewayIp, ok));
  const { port } = server.address() as { port: number };
  process.env.RUNTIME_PLATFORM_AI_URL = `http://${gatewayIp}:${port}/api/ai/v1`;
}

/** A user on a three-agent plan with credits, an agent and a provisioned gateway. */
async function provisionedAgent(name: string) {
  const who = await agentUser("collective");
  await giveCredits(who.id, 5_000_000);
  const agent = await createAgentRecord(who.id, { name, model: "openai/gpt-4o-mini" });
  const instance = await ensureInstanceRecord(who.id, { plan: "collective" });
  await provision(instance.id);
  return { who, agent, instance: (await getInstance(instance.id)) as InstanceRow };
}

describeDocker("agent state on the real gateway: backup, restore, clone, updates, export", () => {
  beforeAll(async () => {
    await gatewayBuildFinished(30 * 60_000, "GATEWAY_OLD_BUILD_STATUS");
    if (!(await rt.imageId(OLDER))) {
      throw new Error(`${OLDER} is not built: gateway/build.sh --openclaw 2026.9.5`);
    }
    process.env.RUNTIME_DEPLOYMENT = testRun;
    process.env.RUNTIME_NETWORK = `agent-test-${testRun}`;
    process.env.AGENT_GATEWAY_IMAGE = OLDER;
    process.env.GATEWAY_HEALTH_TIMEOUT_MS = "300000";
    // A restore here is a backup, a cold boot and a pairing on a loaded machine: past the
    // default 300 s wait the route answers 202, and these tests want the outcome.
    process.env.BACKUP_RESTORE_WAIT_MS = "900000";
    process.env.RECONCILE_CRON = "0 0 1 1 *";
    process.env.BACKUP_CRON = "0 0 1 1 *";
    resetEnvCache();
    setRuntime(rt);
    allowDockerNetworks();
    mswServer.use(...openai.handlers);
    openai.state.reply = REPLY;
    await configureAi({ OPENAI_API_KEY: "test-key" });
    const { gatewayIp } = await rt.ensureNetwork(process.env.RUNTIME_NETWORK, {
      "agent-platform.deployment": testRun,
    });
    await serveAiEndpoint(gatewayIp);
    resetEnvCache();
    await startWorker({ concurrency: 2 });
    const first = await provisionedAgent("Keeper");
    owner = first.who;
    agentId = first.agent.id;
    row = first.instance;
  }, 600_000);

  afterAll(async () => {
    closeGatewayClients();
    await stopWorker(5_000);
    setRuntime(undefined);
    server?.close();
    await cleanupTestObjects(rt);
  });

  it("backup then restore brings back a session and a MEMORY.md line, with a working model token", async () => {
    expect(await version(owner)).toMatch(/2026\.9\.5/);
    const remembered = await asUser(owner, memoryRoute, "/api/memory", {
      method: "POST",
      body: { content: LINE, agentId },
    });
    expect(remembered.status, remembered.text).toBe(200);
    const turn = await chat(owner.id, { message: "Please remember the teapot", agentId });
    sessionId = turn.sessionId;
    expect(turn.reply).toBe(REPLY);
    await flushRecords();
    const backupId = await takeBackup(owner, agentId);

    // After the backup: the memory is replaced, and the model-endpoint token the backed-up
    // config names is revoked (as a repair's re-issue does; revoked here directly, without the
    // repair's reboot, which gateway-real.test.ts covers).
    await asUser(owner, memoryRoute, "/api/memory", {
      method: "POST",
      body: { content: "nothing", mode: "replace", agentId },
    });
    expect(await revokeInstanceTokens(row.id)).toBeGreaterThan(0);
    expect(await memoryOf(owner, agentId)).not.toContain(LINE);

    const restored = await asUser(
      owner,
      restoreRoute,
      `/api/agents/${agentId}/backups/${backupId}/restore`,
      { method: "POST", params: { id: agentId, backupId } },
    );
    expect(restored.status, restored.text).toBe(200);
    closeGatewayClients();
    expect(await memoryOf(owner, agentId)).toContain(LINE);
    expect((await sessionsOf(owner)).map((s) => s.id)).toContain(sessionId);
    expect((await sessionMessages(owner, sessionId)).map((m) => m.content)).toContain(
      "Please remember the teapot",
    );
    // The restored config's token was re-issued: the model answers through the platform.
    const after = await chat(owner.id, { message: "Still there?", sessionId, agentId });
    expect(after.reply).toBe(REPLY);
  }, 900_000);

  it("a clone answers with the original's memory", async () => {
    const cloned = await asUser(owner, cloneRoute, `/api/agents/${agentId}/clone`, {
      method: "POST",
      params: { id: agentId },
      body: { name: "Keeper's twin" },
    });
    expect(cloned.status, cloned.text).toBe(201);
    expect(cloned.json).toMatchObject({
      success: true,
      status: "cloned",
      agent: { name: "Keeper's twin", clonedFrom: agentId },
    });
    const cloneId = cloned.json.agent.id as string;
    expect(cloneId).not.toBe(agentId);
    expect(await memoryOf(owner, cloneId)).toContain(LINE);
    // A new session of the clone: the gateway puts MEMORY.md into the prompt it sends.
    const turn = await chat(owner.id, { message: "What is my teapot called?", agentId: cloneId });
    expect(turn.reply).toBe(REPLY);
    expect(turn.sessionId).not.toMatch(/^agent:main:/);
    expect(lastPrompt()).toContain("Marmaduke");
    // The clone's records: the original's messages, under the clone's own session keys.
    const [copied] = await db()<{ n: number }[]>`
      select count(*)::int as n from agent_messages
      where agent_id = ${cloneId} and content = 'Please remember the teapot'`;
    expect(copied?.n).toBe(1);
  }, 600_000);

  it("an update 2026.9.5 → 2026.9.6 keeps the memory, the session and the config; a broken build rolls back with its backup", async () => {
    // A setting of the gateway's own, outside the platform's part of its config: the update
    // must keep it (the new container runs on the same state volume).
    const timeoutSeconds = async () =>
      (
        await (
          await gatewayClientFor((await getInstance(row.id)) as InstanceRow)
        ).request<{ config?: { agents?: { defaults?: { timeoutSeconds?: number } } } }>(
          "config.get",
        )
      ).config?.agents?.defaults?.timeoutSeconds;
    const before = await gatewayClientFor((await getInstance(row.id)) as InstanceRow);
    const { hash } = await before.request<{ hash: string }>("config.get");
    await before.request(
      "config.patch",
      { baseHash: hash, raw: JSON.stringify({ agents: { defaults: { timeoutSeconds: 123 } } }) },
      { timeoutMs: 30_000 },
    );
    expect(await timeoutSeconds()).toBe(123);

    process.env.AGENT_GATEWAY_IMAGE = GATEWAY_IMAGE;
    resetEnvCache();
    const updated = await updateImage(row.id);
    expect(updated).toMatchObject({ updated: GATEWAY_IMAGE });
    closeGatewayClients();
    expect(await version(owner)).toMatch(/2026\.9\.6/);
    expect(await timeoutSeconds()).toBe(123);
    expect(await memoryOf(owner, agentId)).toContain(LINE);
    expect((await sessionsOf(owner)).map((s) => s.id)).toContain(sessionId);
    expect((await chat(owner.id, { message: "After the update", sessionId, agentId })).reply).toBe(
      REPLY,
    );

    // A build that cannot start: the update rolls back to 2026.9.6 and the state snapshot.
    const broken = `agent-platform-test-broken-${testRun}:2026.9.7`;
    buildImage(broken, GATEWAY_IMAGE, [
      'ENTRYPOINT ["/bin/sh", "-c", "echo this build is broken >&2; exit 3"]',
      `LABEL agent-platform.test-build=${testRun}`,
    ]);
    try {
      process.env.AGENT_GATEWAY_IMAGE = broken;
      resetEnvCache();
      const rolled = await updateImage(row.id);
      // Its crash was seen, not waited out (GATEWAY_HEALTH_TIMEOUT_MS is 300 s here).
      expect(rolled).toMatchObject({
        rolledBack: GATEWAY_IMAGE,
        reason: expect.not.stringMatching(/within \d+ ms/),
      });
      const [pre] = await db()<{ status: string }[]>`
        select status from agent_backups where agent_id = ${agentId} and reason = 'pre-update'
        order by created_at desc limit 1`;
      expect(pre?.status).toBe("ready");
      closeGatewayClients();
      expect(await version(owner)).toMatch(/2026\.9\.6/);
      expect(await memoryOf(owner, agentId)).toContain(LINE);
      expect((await sessionsOf(owner)).map((s) => s.id)).toContain(sessionId);
    } finally {
      process.env.AGENT_GATEWAY_IMAGE = GATEWAY_IMAGE;
      resetEnvCache();
      removeImages(broken);
    }
  }, 1_200_000);

  it("an export from this platform database imports on a second one", async () => {
    const backupId = await takeBackup(owner, agentId);
    const res = await exportRoute.loader({
      request: new Request(`http://localhost/api/agents/${agentId}/backups/${backupId}/export`, {
        headers: { cookie: owner.cookie },
      }),
      params: { id: agentId, backupId },
      context: { remoteAddress: "127.0.0.1" },
    } as never);
    expect(res.status).toBe(200);
    const archive = Buffer.from(await res.arrayBuffer());
    const firstKey = platformPublicKey();

    // Another installation: its own database and sealing key, trusting the first one's key.
    closeGatewayClients();
    await stopWorker(5_000);
    await stopBoss({ graceful: false });
    await closeDb();
    process.env.DATABASE_URL = await cloneDatabase(inject("adminDatabaseUrl"));
    process.env.SEALING_KEY = "b".repeat(64);
    process.env.EXPORT_TRUSTED_KEYS = firstKey;
    resetEnvCache();
    await configureAi({ OPENAI_API_KEY: "test-key" });
    await startWorker({ concurrency: 2 });
    const second = await provisionedAgent("Heir");
    expect(platformPublicKey()).not.toBe(firstKey);
    const imported = await asUser(
      second.who,
      importRoute,
      `/api/agents/${second.agent.id}/import`,
      {
        method: "POST",
        params: { id: second.agent.id },
        rawBody: archive,
        headers: { "content-type": "application/x-tar" },
      },
    );
    expect(imported.status, imported.text).toBe(200);
    // The archive's state was saved from a running gateway on another host: its owner lease is
    // released on unpacking, so the gateway started at once instead of waiting it out (300 s).
    expect((await rt.inspect(second.instance.container_name))?.restartCount).toBe(0);
    closeGatewayClients();
    expect(await memoryOf(second.who, second.agent.id)).toContain(LINE);
    expect((await sessionsOf(second.who)).map((s) => s.id)).toContain(sessionId);
    const [message] = await db()<{ n: number }[]>`
      select count(*)::int as n from agent_messages
      where agent_id = ${second.agent.id} and content = 'Please remember the teapot'`;
    expect(message?.n).toBe(1);
  }, 900_000);
});
