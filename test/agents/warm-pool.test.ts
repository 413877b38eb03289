import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, expect, it } from "vitest";
import { z } from "zod";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import { ensureInstanceRecord, getInstance } from "../../app/server/agents/instances.server.ts";
import { chat } from "../../app/server/agents/talk.server.ts";
import { authenticateInstanceToken } from "../../app/server/ai/instance-tokens.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { deviceIdentityFromPrivateKey } from "../../app/server/openclaw/device-identity.server.ts";
import { unseal } from "../../app/server/platform/crypto.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { sendResponse, toRequest } from "../../app/server/platform/web/node-http.server.ts";
import { STATE_DIR } from "../../worker/instances/engine.ts";
import { PLATFORM_CONFIG_VERSION, patchConfig } from "../../worker/instances/gateway-config.ts";
import { observe } from "../../worker/instances/observe.ts";
import { connectPaired, connectWithPairing } from "../../worker/instances/pairing.ts";
import type { PoolRow } from "../../worker/instances/pool.ts";
import { fillPool } from "../../worker/instances/pool-fill.ts";
import { provision } from "../../worker/instances/provision.ts";
import { reconcileAll } from "../../worker/instances/reconcile.ts";
import { teardown } from "../../worker/instances/teardown.ts";
import { WARMUP_MESSAGE, warmUpAfterBoot } from "../../worker/instances/warm-up.ts";
import { instanceAction } from "../../worker/jobs/instance-action.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { configureAi, giveCredits } from "../ai/support.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import {
  allowDockerNetworks,
  cleanupTestObjects,
  describeDocker,
  testRun,
} from "../runtime/docker-support.ts";

// Warm pool with the real gateway, one pooled gateway for the whole file: it is started, paired
// and warmed up by a dry-run chat turn that the platform's model endpoint answers for its
// warm-up token (no provider call, nothing metered), leaving no session behind; a provisioning
// adopts it (config patched for the tenant over the control protocol), the tenant's first chat
// goes through the platform to the (msw) provider and is metered to the tenant; reconcile
// leaves it alone; teardown removes it.

const rt = new DockerRuntime({ maxCpus: 1 });
const openai = createOpenAiFake();
const REPLY = "Hello from the fake model behind the platform.";
const TENANT = "usr_warm";
let server: Server;
/** Bearer tokens the platform's model endpoint saw, in order. */
const bearers: string[] = [];
/** Chat calls the (msw) provider got; a catalog refresh may list its models as well. */
const chatCallList = () => openai.state.calls.filter((c) => c.body !== undefined);
const chatCalls = () => chatCallList().length;

/**
 * Where the gateway's state still holds `needle`: files (transcripts, memory, archives) by
 * content, and the rows of its SQLite databases (sessions and transcript events live there),
 * read with Node's own SQLite inside the container. Freed SQLite pages are not content.
 */
async function stateMentioning(container: string, needle: string): Promise<string[]> {
  const script = `
    const { DatabaseSync } = require("node:sqlite");
    const fs = require("node:fs"), path = require("node:path");
    const needle = process.argv[1], hits = [];
    const walk = (d) => !fs.existsSync(d) ? [] : fs.readdirSync(d, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(path.join(d, e.name)) : e.isFile() ? [path.join(d, e.name)] : []);
    for (const f of [...walk(${JSON.stringify(STATE_DIR)}), ...walk("/tmp/openclaw")]) {
      if (/\\.sqlite(-wal|-shm|-journal)?$/.test(f)) {
        if (!f.endsWith(".sqlite")) continue;
        // A copy (with its write-ahead log): the gateway holds the original locked.
        const copy = "/tmp/state-check.sqlite";
        for (const x of ["", "-wal", "-shm"]) fs.rmSync(copy + x, { force: true });
        fs.copyFileSync(f, copy);
        if (fs.existsSync(f + "-wal")) fs.copyFileSync(f + "-wal", copy + "-wal");
        const db = new DatabaseSync(copy);
        for (const { name } of db.prepare("select name from sqlite_master where type = 'table'").all()) {
          const rows = db.prepare('select * from "' + name.replace(/"/g, '""') + '"').all();
          const n = rows.filter((r) => JSON.stringify(r, (k, v) =>
            v instanceof Uint8Array ? Buffer.from(v).toString("utf8") : v).includes(needle)).length;
          if (n) hits.push(f + ":" + name + " (" + n + " rows)");
        }
        db.close();
      } else if (fs.readFileSync(f).includes(needle)) hits.push(f);
    }
    console.log(JSON.stringify(hits));`;
  const result = await rt.exec(container, ["node", "--no-warnings", "-e", script, needle]);
  if (result.exitCode !== 0) throw new Error(`state check failed: ${result.stderr}`);
  return JSON.parse(result.stdout.trim().split("\n").at(-1) ?? "[]") as string[];
}

/** The sessions a pooled gateway lists, over its own paired connection. */
async function sessionsOf(pooled: PoolRow): Promise<unknown[]> {
  const { client } = await connectWithPairing({
    container: pooled.container_id as string,
    address: pooled.gateway_address as string,
    token: unseal(pooled.gateway_token_sealed),
    device: deviceIdentityFromPrivateKey(unseal(pooled.device_private_key_sealed as string)),
  });
  try {
    return (await client.request<{ sessions?: unknown[] }>("sessions.list", {})).sessions ?? [];
  } finally {
    client.close();
  }
}

describeDocker("warm pool (real gateway)", () => {
  beforeAll(async () => {
    process.env.RUNTIME_DEPLOYMENT = testRun;
    process.env.RUNTIME_NETWORK = `agent-test-${testRun}`;
    process.env.RUNTIME_POOL_SIZE = "1";
    // The restart below waits for the real gateway's /healthz up to this bound (a 60 s default):
    // on a loaded CI a real gateway's boot took 74 s, and the restart answered a failure.
    process.env.INSTANCE_ACTION_TIMEOUT_MS = "180000";
    resetEnvCache();
    setRuntime(rt);
    allowDockerNetworks();
    mswServer.use(...openai.handlers);
    openai.state.reply = REPLY;
    await configureAi({ OPENAI_API_KEY: "test-key" });
    const { gatewayIp } = await rt.ensureNetwork(process.env.RUNTIME_NETWORK, {
      "agent-platform.deployment": testRun,
    });
    // The platform's model endpoint on the address containers reach.
    server = createServer(async (req, res) => {
      bearers.push(String(req.headers.authorization ?? "").replace(/^Bearer\s+/i, ""));
      const request = toRequest(req, res, `http://${req.headers.host}`);
      const response = await completionsRoute.action({ request, params: {}, context: {} });
      await sendResponse(res, response, false);
    });
    await new Promise<void>((ok) => server.listen(0, gatewayIp, ok));
    const { port } = server.address() as { port: number };
    process.env.RUNTIME_PLATFORM_AI_URL = `http://${gatewayIp}:${port}/api/ai/v1`;
    resetEnvCache();
  }, 60_000);
  afterAll(async () => {
    closeGatewayClients();
    setRuntime(undefined);
    server?.close();
    await cleanupTestObjects(rt);
  });

  let pooled: PoolRow;
  let warmupToken: string;

  it("a pooled gateway is warmed up by a dry-run turn and keeps no session of it", async () => {
    const t0 = Date.now();
    const filled = await fillPool();
    process.stdout.write(`pool fill (start, pair, warm up) ${Date.now() - t0} ms\n`);
    expect(filled.started).toHaveLength(1);
    expect((await fillPool()).started).toHaveLength(0); // full: nothing more
    const rows = await db()<PoolRow[]>`select * from gateway_pool`;
    expect(rows).toHaveLength(1);
    pooled = rows[0] as PoolRow;
    expect(pooled.state).toBe("ready");

    // The dry-run turn reached the platform's endpoint with the warm-up token, which answered
    // it itself: no provider call, nothing metered, to nobody.
    expect(bearers.length).toBeGreaterThan(0);
    warmupToken = bearers[0] as string;
    expect(new Set(bearers)).toEqual(new Set([warmupToken]));
    expect(await authenticateInstanceToken(warmupToken)).toEqual({
      warmup: true,
      poolId: pooled.id,
    });
    expect(openai.state.calls).toHaveLength(0);
    expect(await db()`select 1 from ai_usage`).toHaveLength(0);

    // Nothing of the warm-up is left: no session, no transcript (live or archived).
    expect(await sessionsOf(pooled)).toEqual([]);
    expect(await stateMentioning(pooled.container_id as string, "Warm-up: reply")).toEqual([]);
  }, 300_000);

  it("a gateway ready for RUNTIME_POOL_REWARM_MINUTES is warmed up again; a dead filler's row and a gateway on an older build are discarded", async () => {
    // A fresh fill leaves it alone; an hour later it is re-warmed with a new warm-up token.
    expect((await fillPool()).rewarmed).toEqual([]);
    await db()`update gateway_pool set state_since = now() - interval '1 hour' where id = ${pooled.id}`;
    // A row a filler left behind when it died: 'starting' for longer than a fill can take.
    await db()`insert into gateway_pool (id, container_name, volume_name, image, gateway_token_sealed, state_since)
      values ('gwp_orphan', ${`agent-gwp-orphan-${testRun}`}, ${`agent-gwp-orphan-${testRun}-state`},
        'agent-gateway:none', 'sealed', now() - interval '1 hour')`;
    // A ready gateway on an older build of the tag (gateway/build.sh rebuilt it in place): never
    // adopted, discarded by the next fill (decision 0089).
    expect(pooled.image_id).toMatch(/^sha256:/);
    await db()`insert into gateway_pool (id, container_name, volume_name, image, image_id,
        gateway_token_sealed, state, ready_at)
      values ('gwp_stale', ${`agent-gwp-stale-${testRun}`}, ${`agent-gwp-stale-${testRun}-state`},
        ${pooled.image}, 'sha256:older-build', 'sealed', 'ready', now() - interval '1 day')`;
    const seen = bearers.length;
    const result = await fillPool();
    expect(result).toMatchObject({ started: [], rewarmed: [pooled.id] });
    expect(result.discarded.sort()).toEqual(["gwp_orphan", "gwp_stale"]);
    const [row] = await db()<PoolRow[]>`select * from gateway_pool`;
    expect(row).toMatchObject({ id: pooled.id, state: "ready" });
    expect(Date.now() - (row as PoolRow).state_since.getTime()).toBeLessThan(120_000);
    expect(await db()`select 1 from gateway_pool`).toHaveLength(1);

    // The new dry run used a new warm-up token (the old one is revoked) and left no session.
    const fresh = bearers.slice(seen);
    expect(fresh.length).toBeGreaterThan(0);
    expect(fresh.every((b) => b === fresh[0] && b !== warmupToken)).toBe(true);
    expect(await authenticateInstanceToken(warmupToken)).toBeUndefined();
    warmupToken = fresh[0] as string;
    expect(await sessionsOf(pooled)).toEqual([]);
    expect(await stateMentioning(pooled.container_id as string, WARMUP_MESSAGE)).toEqual([]);
  }, 300_000);

  it("provisioning adopts it; the tenant's first chat is answered through the platform and metered to the tenant", async () => {
    await giveCredits(TENANT, 5_000_000);
    // On a larger plan than the pool's: the adopted gateway gets the plan's limits in place.
    const row = await ensureInstanceRecord(TENANT, { plan: "collective" });
    const t0 = Date.now();
    const result = await provision(row.id);
    const provisionMs = Date.now() - t0;
    expect(result).toMatchObject({ adopted: pooled.container_name });
    const first = await chat(TENANT, { message: "Hi, first message" });
    const firstChatMs = Date.now() - t0;
    process.stdout.write(
      `warm provision ${provisionMs} ms, provision start → first reply ${firstChatMs} ms\n`,
    );
    expect(first.reply).toBe(REPLY);
    expect(first.sessionId).toMatch(/^agent:main:/);

    // The provider saw the tenant's message; the call is metered to the tenant's instance.
    expect(JSON.stringify(openai.state.calls.at(-1)?.body)).toContain("Hi, first message");
    const usage = await db()<{ user_id: string; instance_id: string; status: string }[]>`
      select user_id, instance_id, status from ai_usage`;
    expect(usage.length).toBeGreaterThan(0);
    for (const u of usage)
      expect(u).toEqual({ user_id: TENANT, instance_id: row.id, status: "ok" });

    // The warm-up token became the tenant's (no config reload at adoption): the tenant's call
    // carried it and was answered by the provider, billed to the tenant; it is a warm-up token
    // no more.
    expect(bearers.at(-1)).toBe(warmupToken);
    expect(await authenticateInstanceToken(warmupToken)).toMatchObject({
      userId: TENANT,
      instanceId: row.id,
    });
    const [pool] =
      await db()`select count(*)::int as n from ai_instance_tokens where warmup and revoked_at is null`;
    expect(pool?.n).toBe(0);

    const adopted = await getInstance(row.id);
    expect(adopted).toMatchObject({
      container_name: pooled.container_name,
      observed_state: "running",
      health: "healthy",
    });
    expect(await db()`select 1 from gateway_pool`).toHaveLength(0); // never back to the pool
    const limits = (await rt.inspect(adopted!.container_name))?.limits;
    expect(limits).toMatchObject({ memoryBytes: 4 * 1024 ** 3, cpuShares: 2048, pidsLimit: 1024 });
    const { client, hello } = await connectPaired(adopted!, adopted!.gateway_address!);
    try {
      expect(hello.server.version).toMatch(/2026\.9\.6/);
      // The tenant sees only their own session.
      const list = await client.request<{ sessions?: Array<{ key: string }> }>("sessions.list", {});
      expect((list.sessions ?? []).map((s) => s.key)).toEqual([first.sessionId]);
    } finally {
      client.close();
    }
    const live = await db()`select 1 from ai_instance_tokens
      where instance_id = ${row.id} and revoked_at is null`;
    expect(live).toHaveLength(1);

    // Adopted at the platform's current config version. A gateway made by an older platform
    // (here: its Control UI off, no version recorded) is brought up to date by reconcile, once.
    expect(adopted!.platform_config_version).toBe(PLATFORM_CONFIG_VERSION);
    const controlUi = async () => {
      const paired = await connectPaired(adopted!, adopted!.gateway_address!);
      try {
        const got = await paired.client.request<{ config?: { gateway?: { controlUi?: unknown } } }>(
          "config.get",
        );
        return got.config?.gateway?.controlUi;
      } finally {
        paired.client.close();
      }
    };
    const old = await connectPaired(adopted!, adopted!.gateway_address!);
    try {
      await patchConfig(old.client, { gateway: { controlUi: { enabled: false } } });
    } finally {
      old.client.close();
    }
    await db()`update instances set platform_config_version = null where id = ${row.id}`;
    const reconciled = await reconcileAll();
    expect(reconciled.orphansRemoved).toEqual([]);
    expect(reconciled.instances[row.id]).toBe("ok, platform config brought up to date");
    expect((await getInstance(row.id))?.platform_config_version).toBe(PLATFORM_CONFIG_VERSION);
    await expect
      .poll(() => controlUi().catch(() => undefined), { timeout: 120_000, interval: 1_000 })
      .toMatchObject({ enabled: true });
    expect((await reconcileAll()).instances[row.id]).toBe("ok"); // once
    expect((await rt.inspect(adopted!.container_name))?.running).toBe(true);

    closeGatewayClients();
    await teardown(TENANT);
    expect(await rt.inspect(adopted!.container_name)).toBeUndefined();
    expect(await rt.volumeExists(adopted!.volume_name)).toBe(false);
  }, 300_000);

  let cold: NonNullable<Awaited<ReturnType<typeof getInstance>>>;
  /** The tenant's metered calls after the first chat. */
  let usageRows = 0;

  it("with the pool off, a cold provisioning runs the same dry run under the tenant's token, answered by the platform", async () => {
    process.env.RUNTIME_POOL_SIZE = "0";
    process.env.RUNTIME_COLD_WARMUP = "on";
    resetEnvCache();
    const tenant = "usr_cold";
    await giveCredits(tenant, 5_000_000);
    const row = await ensureInstanceRecord(tenant, { model: "openai/gpt-4o" });
    const seen = bearers.length;
    const callsBefore = openai.state.calls.length;
    const t0 = Date.now();
    const result = await provision(row.id);
    const provisionMs = Date.now() - t0;
    expect(result).not.toHaveProperty("adopted");

    // The dry run's calls carried the tenant's own token (the gateway's config is never
    // swapped) and were answered by the platform itself, recognised by the prompt's tag:
    // nothing reached the provider, nothing was metered.
    const dry = bearers.slice(seen);
    expect(dry.length).toBeGreaterThan(0);
    // A late call of the previous test's gateway (its tenant torn down, its token revoked) can
    // arrive meanwhile when the machine is loaded (seen once in CI): only a live token counts.
    const tokens = [...new Set(dry)];
    const identities = await Promise.all(tokens.map((t) => authenticateInstanceToken(t)));
    const live = tokens.filter((_, i) => identities[i] !== undefined);
    expect(live).toHaveLength(1);
    // Every provider call is metered to its caller: this tenant has none. (Counting the fake
    // provider's calls instead also counts a late call of the previous test's gateway, which
    // can reach the provider after its container is gone when the machine is loaded.)
    await flushMetering();
    // Seen once in CI (2026-11-29, loaded machine): one metered call of this tenant. The calls
    // that reached the provider meanwhile are in the message, to tell which request it was.
    // Each call by its messages after the system prompt (the prompt is the same in all).
    const reached = openai.state.calls.slice(callsBefore).map((c) =>
      z
        .object({ messages: z.array(z.object({ role: z.string(), content: z.unknown() })) })
        .parse(c.body)
        .messages.filter((m) => m.role !== "system")
        .map((m) => `${m.role}: ${JSON.stringify(m.content).slice(0, 400)}`)
        .join(" | "),
    );
    expect(
      await db()`select model, status from ai_usage where user_id = ${tenant}`,
      `provider calls during the cold provisioning:\n${reached.join("\n").slice(0, 8_000)}`,
    ).toEqual([]);
    expect(await authenticateInstanceToken(live[0] as string)).toMatchObject({
      userId: tenant,
      instanceId: row.id,
    });
    cold = (await getInstance(row.id)) as typeof cold;
    expect(cold).toMatchObject({ observed_state: "running", health: "healthy" });
    const { client } = await connectPaired(cold, cold.gateway_address as string);
    try {
      const list = await client.request<{ sessions?: unknown[] }>("sessions.list", {});
      expect(list.sessions ?? []).toEqual([]);
      const cfg = await client.request<{
        config?: { agents?: { defaults?: { model?: { primary?: string } } } };
      }>("config.get");
      expect(cfg.config?.agents?.defaults?.model?.primary).toBe("platform/openai/gpt-4o");
    } finally {
      client.close();
    }
    expect(await stateMentioning(cold.container_id as string, WARMUP_MESSAGE)).toEqual([]);

    // The tenant's first chat: through the platform to the provider, with that token, metered.
    const t1 = Date.now();
    const first = await chat(tenant, { message: "Hi from a cold start" });
    process.stdout.write(
      `cold provision with dry run ${provisionMs} ms, then first reply ${Date.now() - t1} ms\n`,
    );
    expect(first.reply).toBe(REPLY);
    expect(bearers.at(-1)).toBe(live[0]);
    expect(JSON.stringify(openai.state.calls.at(-1)?.body)).toContain("Hi from a cold start");
    await flushMetering();
    usageRows = (await db()`select 1 from ai_usage where user_id = ${tenant}`).length;
    expect(usageRows).toBeGreaterThan(0);
  }, 400_000);

  it("a restarted gateway runs the dry run once healthy (warm-up-instance): the tenant's sessions are kept, nothing is metered, the next first chat is fast", async () => {
    const tenant = cold.user_id;
    const keysOf = async (row: typeof cold) => {
      const { client } = await connectPaired(row, row.gateway_address as string);
      try {
        const list = await client.request<{ sessions?: Array<{ key: string }> }>(
          "sessions.list",
          {},
        );
        return (list.sessions ?? []).map((s) => s.key).sort();
      } finally {
        client.close();
      }
    };
    const before = await keysOf(cold);
    expect(before.length).toBeGreaterThan(0); // the first chat's session

    // The lifecycle action enqueues the dry run of the booted gateway.
    const restarted = await instanceAction({ instanceId: cold.id, action: "restart" });
    expect(restarted, JSON.stringify(restarted)).toMatchObject({ ok: true });
    const queued = await db()`select 1 from pgboss.job
      where name = 'warm-up-instance' and data->>'instanceId' = ${cold.id}`;
    expect(queued).toHaveLength(1);

    // What the worker runs for that job.
    const seen = bearers.length;
    const calls = chatCalls();
    const outcome = await warmUpAfterBoot(cold.id);
    expect(outcome).toMatchObject({ warmed: true });
    const dry = bearers.slice(seen);
    expect(dry.length).toBeGreaterThan(0);
    expect(new Set(dry)).toEqual(new Set([bearers[seen - 1]])); // the tenant's token
    // The dry run never reaches the provider. The restarted gateway may make a call of its own
    // meanwhile (seen once in CI: one more chat call than before); such a call goes to the
    // provider and is metered like any other, and is printed here to tell what it was.
    const extra = chatCallList().slice(calls);
    for (const c of extra) {
      const body = JSON.stringify(c.body);
      process.stdout.write(`restart: a provider call besides the dry run: ${body.slice(0, 600)}\n`);
      expect(body).not.toContain(WARMUP_MESSAGE);
    }
    await flushMetering();
    expect(await db()`select 1 from ai_usage where user_id = ${tenant}`).toHaveLength(
      usageRows + extra.length,
    );
    const booted = (await getInstance(cold.id)) as typeof cold;
    expect(await keysOf(booted)).toEqual(before);
    expect(await stateMentioning(booted.container_id as string, WARMUP_MESSAGE)).toEqual([]);

    // What the worker's sampler does within 10 s (none runs in this file): the row leaves
    // "starting", else the chat waits out AGENT_CHAT_START_WAIT_MS (120 s) first.
    await expect
      .poll(async () => (await observe(booted)).observed_state, { timeout: 120_000 })
      .toBe("running");

    // The first chat after the boot goes to the provider and is metered.
    const t0 = Date.now();
    const first = await chat(tenant, { message: "Hi after a restart" });
    process.stdout.write(
      `restart: dry run ${outcome.ms} ms, then first reply ${Date.now() - t0} ms\n`,
    );
    expect(first.reply).toBe(REPLY);
    expect(JSON.stringify(openai.state.calls.at(-1)?.body)).toContain("Hi after a restart");

    // Long-running or stopped gateways are left alone; so is everything with warm-ups off.
    process.env.RUNTIME_COLD_WARMUP = "off";
    resetEnvCache();
    expect(await warmUpAfterBoot(cold.id)).toEqual({ skipped: "RUNTIME_COLD_WARMUP is off" });
  }, 400_000);
});
