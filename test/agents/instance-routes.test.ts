import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as repairRoute from "../../app/routes/api.instance.$userId.repair.ts";
import * as resetMemoryRoute from "../../app/routes/api.instance.$userId.reset-memory.ts";
import * as restartRoute from "../../app/routes/api.instance.$userId.restart.ts";
import * as startRoute from "../../app/routes/api.instance.$userId.start.ts";
import * as statsRoute from "../../app/routes/api.instance.$userId.stats.ts";
import * as stopRoute from "../../app/routes/api.instance.$userId.stop.ts";
import * as tokenRoute from "../../app/routes/api.instance.$userId.token.ts";
import * as getInstanceRoute from "../../app/routes/api.instance.$userId.ts";
import * as updateRoute from "../../app/routes/api.instance.$userId.update.ts";
import {
  ensureInstanceRecord,
  getInstance,
  getInstanceByUser,
} from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { hasLiveJob } from "../../app/server/platform/jobs.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { ensureContainer } from "../../worker/instances/container.ts";
import { DEPLOYMENT_LABEL, deployment } from "../../worker/instances/engine.ts";
import { reconcileAll, reconcileOne } from "../../worker/instances/reconcile.ts";
import { sampleAll } from "../../worker/instances/sampler.ts";
import { teardown } from "../../worker/instances/teardown.ts";
import { updateImage } from "../../worker/instances/update-image.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { LABELS } from "../../worker/runtime/types.ts";
import { call, type RouteModule } from "../helpers/api.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";
import {
  allowDockerNetworks,
  buildImage,
  cleanupTestObjects,
  describeDocker,
  ensureHealthzImage,
  ensureSleeperImage,
  GATEWAY_IMAGE,
  HEALTHZ_LINES,
  removeImages,
  SLEEPER_IMAGE,
  testRun,
  waitFor,
} from "../runtime/docker-support.ts";

// Lifecycle routes end to end: route → pg-boss job → in-process worker → Docker → row → route.
// Containers run a `sleep` stand-in of the gateway image (no gateway start), so the lifecycle is
// checked in seconds; test/agents/gateway-real.test.ts covers the real gateway.

const rt = new DockerRuntime({ maxCpus: 1 });
/** A gateway that scribbles on its state, then exits at once (an update that must roll back). */
const BROKEN_CMD = 'CMD ["sh", "-c", "echo after > /home/node/.openclaw/marker; exit 1"]';
const path = (userId: string, op = "") => `/api/instance/${userId}${op ? `/${op}` : ""}`;
// Each call is made by the user the path names, signed in with a session cookie.
const post = async (m: unknown, userId: string, op: string) =>
  call(m as RouteModule, path(userId, op), {
    method: "POST",
    params: { userId },
    headers: { cookie: await sessionCookieFor(userId) },
  });
/** The engine's events of a container (their actions, in order) from `since` (s) until now. */
async function containerEvents(name: string, since: number): Promise<string[]> {
  const stream = (await rt.docker.getEvents({
    since,
    until: Math.ceil(Date.now() / 1000) + 1,
    filters: { type: ["container"], container: [name] },
  })) as NodeJS.ReadableStream;
  let text = "";
  for await (const chunk of stream) text += chunk.toString();
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => (JSON.parse(line) as { Action: string }).Action);
}

const get = async (m: unknown, userId: string, op = "") =>
  call(m as RouteModule, path(userId, op), {
    params: { userId },
    headers: { cookie: await sessionCookieFor(userId) },
  });

describe("instance routes without Docker work", () => {
  it("404 for a user without an instance; token is generated once and kept", async () => {
    expect((await get(getInstanceRoute, "usr_nobody")).status).toBe(404);
    expect((await get(statsRoute, "usr_nobody", "stats")).status).toBe(404);
    expect((await post(startRoute, "usr_nobody", "start")).status).toBe(404);
    const first = await get(tokenRoute, "usr_tok", "token");
    expect(first.status).toBe(200);
    expect(first.json).toEqual({ token: expect.stringMatching(/^[0-9a-f]{64}$/) });
    const second = await get(tokenRoute, "usr_tok", "token");
    expect(second.json.token).toBe(first.json.token);
    // Stored sealed, never in clear.
    const [row] = await db()`select gateway_token_sealed from instances where user_id = 'usr_tok'`;
    expect(String(row?.gateway_token_sealed)).not.toContain(first.json.token);
  });

  it("answers 401 without credentials and 404 for another user's id on every route", async () => {
    const anonymous = await call(getInstanceRoute as RouteModule, path("usr_tok"), {
      params: { userId: "usr_tok" },
    });
    expect(anonymous.status).toBe(401);
    await get(tokenRoute, "usr_tok", "token"); // usr_tok has an instance
    const intruder = await sessionCookieFor("usr_intruder");
    const routes: Array<[unknown, string, string]> = [
      [getInstanceRoute, "", "GET"],
      [statsRoute, "stats", "GET"],
      [tokenRoute, "token", "GET"],
      [startRoute, "start", "POST"],
      [stopRoute, "stop", "POST"],
      [restartRoute, "restart", "POST"],
      [updateRoute, "update", "POST"],
      [repairRoute, "repair", "POST"],
      [resetMemoryRoute, "reset-memory", "POST"],
    ];
    for (const [m, op, method] of routes) {
      const res = await call(m as RouteModule, path("usr_tok", op), {
        method,
        params: { userId: "usr_tok" },
        headers: { cookie: intruder },
      });
      expect(res.status, `${method} ${op}`).toBe(404);
      expect(res.json).toEqual({ error: "Instance not found" });
    }
  });

  it("rejects a malformed user id with 400", async () => {
    expect((await get(getInstanceRoute, "bad id!")).status).toBe(400);
  });
});

describeDocker("instance lifecycle routes (Docker)", () => {
  beforeAll(async () => {
    process.env.RUNTIME_DEPLOYMENT = testRun;
    process.env.RUNTIME_NETWORK = `agent-test-${testRun}`;
    process.env.AGENT_GATEWAY_IMAGE = ensureSleeperImage();
    process.env.INSTANCE_ACTION_TIMEOUT_MS = "30000";
    process.env.RECONCILE_CRON = "0 0 1 1 *"; // the test calls reconcile itself
    resetEnvCache();
    resetRateLimiters();
    setRuntime(rt);
    allowDockerNetworks();
    await startWorker({ concurrency: 2 });
  }, 120_000);
  afterAll(async () => {
    await stopWorker(5_000);
    setRuntime(undefined);
    await cleanupTestObjects(rt);
  });

  it("start, stop, restart, stats, update answer the contract's bodies, observed in Docker", async () => {
    // Start and restart answer once /healthz does (issue 52): a stand-in that answers it.
    process.env.AGENT_GATEWAY_IMAGE = ensureHealthzImage();
    resetEnvCache();
    const userId = "usr_life";
    await ensureUser(userId);
    const row = await ensureInstanceRecord(userId, { plan: "collective" });

    process.env.BOOT_CPU_WEIGHT = "8"; // decision 0250, off by default
    resetEnvCache();
    const since = Math.floor(Date.now() / 1000) - 1;
    const started = await post(startRoute, userId, "start").finally(() => {
      delete process.env.BOOT_CPU_WEIGHT;
      resetEnvCache();
    });
    expect(started).toMatchObject({ status: 200, json: { success: true, status: "running" } });
    // The answer and a read straight after agree.
    expect((await get(getInstanceRoute, userId)).json.status).toBe("running");
    const info = await rt.inspect(row.container_name);
    expect(info?.running).toBe(true);
    expect(info?.labels[LABELS.userId]).toBe(userId);
    expect(info?.limits.memoryBytes).toBe(4 * 1024 ** 3);
    // It booted weighed for the boot and weighs its plan's once healthy (decision 0250): the
    // engine recorded two updates of its CPU weight around the start.
    expect(info?.limits.cpuShares).toBe(2048);
    const events = await containerEvents(row.container_name, since);
    expect(events.filter((a) => a === "update" || a === "start")).toEqual([
      "update",
      "start",
      "update",
    ]);

    const shown = await get(getInstanceRoute, userId);
    expect(shown.status).toBe(200);
    expect(shown.json).toEqual({
      userId,
      status: expect.any(String),
      startedAt: expect.any(String),
      subdomain: `${userId}.localhost`,
      url: `http://localhost:3000/agents/${userId}/ui/`,
      plan: "collective",
      gatewayVersion: expect.any(String),
    });

    const stopped = await post(stopRoute, userId, "stop");
    expect(stopped.json).toEqual({ success: true, status: "stopped" });
    expect((await rt.inspect(row.container_name))?.running).toBe(false);
    expect((await get(getInstanceRoute, userId)).json.status).toBe("stopped");

    const restarted = await post(restartRoute, userId, "restart");
    expect(restarted.json).toEqual({ success: true, status: "running" });
    expect((await rt.inspect(row.container_name))?.running).toBe(true);
    // Issue 52: the restart answered `running` while a GET straight after said `starting`.
    expect((await get(getInstanceRoute, userId)).json.status).toBe("running");
    // Each start-up is a progress run (decision 0158), ready once the gateway answered.
    const runs = () =>
      db()<{ action: string; outcome: string | null }[]>`
        select action, outcome from instance_runs where instance_id = ${row.id} order by id`;
    expect(await runs()).toEqual([
      { action: "start", outcome: "ready" },
      { action: "restart", outcome: "ready" },
    ]);
    const steps = await db()<{ step: string }[]>`
      select step from instance_progress where instance_id = ${row.id} order by step`;
    expect(steps.map((s) => s.step)).toEqual(["container-created", "gateway-healthy", "ready"]);

    await sampleAll();
    const stats = await get(statsRoute, userId, "stats");
    expect(stats.json).toEqual({
      userId,
      cpu: expect.stringMatching(/^\d+(\.\d+)?%$/),
      memory: expect.stringMatching(/MiB \/ 4GiB$/),
      status: expect.any(String),
      plan: "collective",
      gatewayVersion: expect.any(String),
      // Observed running (the stand-in answers /healthz): live.
      stale: false,
      sampledAt: expect.any(String),
    });

    const updated = await post(updateRoute, userId, "update");
    expect(updated.json).toEqual({ success: true, status: "running" });
    // The update job runs in the background; wait for it to settle before the next test.
    await waitFor(
      async () => {
        const r = await getInstanceByUser(userId);
        return r && r.observed_state !== "updating" && r.image ? r : undefined;
      },
      { timeoutMs: 60_000, what: "update-image to settle" },
    );
    process.env.AGENT_GATEWAY_IMAGE = SLEEPER_IMAGE;
    resetEnvCache();
  }, 120_000);

  it("answers 502 {success:false,status:'error'} when Docker does not answer", async () => {
    const userId = "usr_down";
    await ensureUser(userId);
    await ensureInstanceRecord(userId);
    setRuntime(new DockerRuntime({ socketPath: "/nonexistent/docker.sock" }));
    try {
      for (const [m, op] of [
        [startRoute, "start"],
        [stopRoute, "stop"],
        [restartRoute, "restart"],
        [repairRoute, "repair"],
      ] as const) {
        const res = await post(m, userId, op);
        expect(res.status).toBe(502);
        expect(res.json).toMatchObject({ success: false, status: "error" });
      }
    } finally {
      setRuntime(rt);
    }
  }, 60_000);

  it("reconcile restarts a killed container, records an OOM kill, removes an orphan", async () => {
    const userId = "usr_heal";
    await ensureUser(userId);
    const row = await ensureInstanceRecord(userId);
    await ensureContainer(row);
    const before = await rt.inspect(row.container_name);
    await rt.docker.getContainer(row.container_name).kill();
    await waitFor(async () => !(await rt.inspect(row.container_name))?.running, { what: "kill" });

    // An orphan: our labels, no record.
    const orphanVolume = `agent-ins_orphan_${testRun}-state`;
    await rt.ensureVolume(orphanVolume, { [DEPLOYMENT_LABEL]: deployment() });
    const orphan = await rt.create({
      instanceId: `ins_orphan_${testRun}`,
      userId: "usr_gone",
      image: process.env.AGENT_GATEWAY_IMAGE as string,
      hostname: "orphan",
      name: `agent-ins_orphan_${testRun}`,
      volume: orphanVolume,
      volumeTarget: "/home/node/.openclaw",
      network: process.env.RUNTIME_NETWORK as string,
      limits: { memoryBytes: 64 * 1024 ** 2, cpuShares: 256, cpus: 0.2, pidsLimit: 64 },
      env: {},
      labels: { [DEPLOYMENT_LABEL]: deployment() },
    });

    // The stand-in never answers /healthz: the restart's wait for it ends at this bound.
    process.env.GATEWAY_HEALTH_TIMEOUT_MS = "3000";
    resetEnvCache();
    const result = await reconcileAll();
    expect(result.orphansRemoved).toContain(`agent-ins_orphan_${testRun}`);
    expect(await rt.inspect(orphan)).toBeUndefined();
    // The pass queues the restart (decision 0240); the worker's restart-instance job boots it.
    expect(result.instances[row.id]).toMatch(/crashed, restart queued/);
    expect((await getInstance(row.id))?.observed_state).toBe("starting");
    await waitFor(async () => !(await hasLiveJob("restart-instance", { instanceId: row.id })), {
      what: "the restart job done",
      timeoutMs: 60_000,
    });
    delete process.env.GATEWAY_HEALTH_TIMEOUT_MS;
    resetEnvCache();
    const after = await rt.inspect(row.container_name);
    expect(after?.running).toBe(true);
    expect(after?.id).toBe(before?.id);
    const healed = await getInstance(row.id);
    expect(healed?.crash_restarts).toBe(1);
    expect(healed?.last_error).toMatch(/exited with code 137/);
    // The healing restart is a run of its own, as a user's restart is (progress, estimates).
    const [run] = await db()<{ action: string }[]>`
      select action from instance_runs where instance_id = ${row.id} order by id desc limit 1`;
    expect(run?.action).toBe("restart");

    // OOM: the container is killed at its memory limit; reconcile records it as such.
    await rt.remove(row.container_name);
    const oomId = await rt.create({
      instanceId: row.id,
      userId,
      image: process.env.AGENT_GATEWAY_IMAGE as string,
      hostname: row.container_name,
      name: row.container_name,
      volume: row.volume_name,
      volumeTarget: "/home/node/.openclaw",
      network: process.env.RUNTIME_NETWORK as string,
      limits: { memoryBytes: 32 * 1024 ** 2, cpuShares: 256, cpus: 0.5, pidsLimit: 64 },
      env: {},
      cmd: ["sh", "-c", "x=aaaaaaaaaaaaaaaa; while true; do x=$x$x; done"],
      labels: { [DEPLOYMENT_LABEL]: deployment() },
      restartPolicy: "no",
    });
    await rt.start(oomId);
    await waitFor(
      async () => {
        const i = await rt.inspect(oomId);
        return i && !i.running ? i : undefined;
      },
      { what: "OOM kill", timeoutMs: 30_000 },
    );
    await db()`update instances set next_restart_at = now() + interval '1 hour' where id = ${row.id}`;
    const outcome = await reconcileOne((await getInstance(row.id))!);
    expect(outcome).toMatch(/^oom_killed/);
    const oom = await getInstance(row.id);
    expect(oom).toMatchObject({ observed_state: "oom_killed", oom_kills: 1 });
    expect(oom?.last_error).toMatch(/OOMKilled/);
    // A second pass does not count the same kill twice.
    await reconcileOne((await getInstance(row.id))!);
    expect((await getInstance(row.id))?.oom_kills).toBe(1);
  }, 120_000);

  it("a provisioning interrupted after create leaves exactly one container after retry", async () => {
    const userId = "usr_retry";
    await ensureUser(userId);
    const row = await ensureInstanceRecord(userId);
    // First attempt "dies" right after creating the container (never started).
    await rt.ensureVolume(row.volume_name, { [DEPLOYMENT_LABEL]: deployment() });
    await rt.create({
      instanceId: row.id,
      userId,
      image: process.env.AGENT_GATEWAY_IMAGE as string,
      hostname: row.container_name,
      name: row.container_name,
      volume: row.volume_name,
      volumeTarget: "/home/node/.openclaw",
      network: process.env.RUNTIME_NETWORK as string,
      limits: { memoryBytes: 64 * 1024 ** 2, cpuShares: 256, cpus: 0.2, pidsLimit: 64 },
      env: {},
      labels: { [DEPLOYMENT_LABEL]: deployment() },
    });
    await ensureContainer(row);
    await ensureContainer((await getInstance(row.id))!);
    const list = await rt.list({ [LABELS.instanceId]: row.id });
    expect(list).toHaveLength(1);
    expect(list[0]?.state).toBe("running");
  }, 60_000);

  it("teardown removes container, volume, tokens and record; twice is harmless", async () => {
    const userId = "usr_bye";
    await ensureUser(userId);
    const row = await ensureInstanceRecord(userId);
    await ensureContainer(row);
    expect(await rt.volumeExists(row.volume_name)).toBe(true);
    const live = await db()`select 1 from ai_instance_tokens
      where instance_id = ${row.id} and revoked_at is null`;
    expect(live).toHaveLength(1);
    const result = await teardown(userId);
    expect(result).toMatchObject({ instancesFound: 1, tokensRevoked: 1 });
    expect(await rt.inspect(row.container_name)).toBeUndefined();
    expect(await rt.volumeExists(row.volume_name)).toBe(false);
    expect(await getInstanceByUser(userId)).toBeUndefined();
    expect(await teardown(userId)).toMatchObject({ instancesFound: 0 });
  }, 60_000);

  it("an account's deletion cascades to its instance row; teardown still removes everything", async () => {
    const userId = "usr_cascade";
    await ensureUser(userId);
    const row = await ensureInstanceRecord(userId);
    await ensureContainer(row);
    // What deleteUser does (the teardown job it enqueues is run by hand here).
    await db()`delete from users where id = ${userId}`;
    expect(await getInstanceByUser(userId)).toBeUndefined();
    const result = await teardown(userId);
    expect(result).toMatchObject({ instancesFound: 1, tokensRevoked: 1 });
    expect(await rt.inspect(row.container_name)).toBeUndefined();
    expect(await rt.volumeExists(row.volume_name)).toBe(false);
    expect(await db()`select 1 from instance_teardowns where user_id = ${userId}`).toHaveLength(0);
    expect(await teardown(userId)).toMatchObject({ instancesFound: 0 });
    // An instance needs an account.
    await expect(ensureInstanceRecord("usr_no_account")).rejects.toThrow(/foreign key/);
  }, 60_000);

  it("answers 502 {success:false,status:'error'} when Docker answers but the gateway does not", async () => {
    // The stand-in container runs, but nothing listens on the gateway port.
    const userId = "usr_nogateway";
    await ensureUser(userId);
    const row = await ensureInstanceRecord(userId);
    await ensureContainer(row);
    const res = await post(resetMemoryRoute, userId, "reset-memory");
    expect(res.status).toBe(502);
    expect(res.json).toMatchObject({ success: false, status: "error" });
    expect((await rt.inspect(row.container_name))?.running).toBe(true);
  }, 60_000);

  it("answers 502 when no worker takes the job in time", async () => {
    const userId = "usr_noworker";
    await ensureUser(userId);
    await ensureInstanceRecord(userId);
    await stopWorker(5_000);
    process.env.INSTANCE_ACTION_TIMEOUT_MS = "500";
    resetEnvCache();
    const res = await post(startRoute, userId, "start");
    expect(res.status).toBe(502);
    expect(res.json).toMatchObject({ success: false, status: "error" });
  }, 30_000);
});

describeDocker("update-image (Docker)", () => {
  beforeAll(async () => {
    process.env.RUNTIME_DEPLOYMENT = testRun;
    process.env.RUNTIME_NETWORK = `agent-test-${testRun}`;
    process.env.AGENT_GATEWAY_IMAGE = ensureSleeperImage();
    process.env.GATEWAY_HEALTH_TIMEOUT_MS = "3000"; // the stand-in never answers /healthz
    resetEnvCache();
    setRuntime(rt);
    allowDockerNetworks();
  });
  afterAll(async () => {
    process.env.AGENT_GATEWAY_IMAGE = SLEEPER_IMAGE;
    resetEnvCache();
    setRuntime(undefined);
    await cleanupTestObjects(rt);
  });

  it("snapshots the state, rolls back image and state when the new gateway is not healthy", async () => {
    const userId = "usr_update";
    await ensureUser(userId);
    const row = await ensureInstanceRecord(userId);
    await ensureContainer(row);
    await rt.exec(row.container_name, ["sh", "-c", "echo before > /home/node/.openclaw/marker"]);
    // A "new version" whose gateway exits at once and scribbles on the state first.
    const broken = `${SLEEPER_IMAGE}-broken`;
    buildImage(broken, SLEEPER_IMAGE, [BROKEN_CMD]);
    process.env.AGENT_GATEWAY_IMAGE = broken;
    resetEnvCache();
    try {
      const result = await updateImage(row.id);
      expect(result).toMatchObject({ rolledBack: SLEEPER_IMAGE });
      // The update's progress run (decision 0158): its container came up, then it failed.
      const [run] = await db()<{ action: string; outcome: string }[]>`
        select action, outcome from instance_runs where instance_id = ${row.id}`;
      expect(run).toEqual({ action: "update", outcome: "failed" });
      const after = await getInstance(row.id);
      expect(after?.image).toBe(SLEEPER_IMAGE);
      expect(after?.last_error).toMatch(/update to .*-broken failed.*rolled back/);
      const info = await rt.inspect(row.container_name);
      expect(info?.image).toBe(SLEEPER_IMAGE);
      expect(info?.running).toBe(true);
      const marker = await rt.exec(row.container_name, ["cat", "/home/node/.openclaw/marker"]);
      expect(marker.stdout).toBe("before\n");
      // The state folder keeps its owner and mode.
      const mode = await rt.exec(row.container_name, [
        "stat",
        "-c",
        "%u %a",
        "/home/node/.openclaw",
      ]);
      expect(mode.stdout).toBe("1000 700\n");
    } finally {
      removeImages(broken);
    }
  }, 240_000);

  it("a tag rebuilt in place is an update; until then instances stay on their image id; a failed rebuild rolls back to the previous id", async () => {
    process.env.GATEWAY_HEALTH_TIMEOUT_MS = "60000"; // this stand-in answers /healthz
    const tag = `agent-platform-test-inplace:${testRun}`;
    const build = (n: number, lines = HEALTHZ_LINES) =>
      buildImage(tag, GATEWAY_IMAGE, [`LABEL agent-platform.test-build=${n}`, ...lines]);
    const first = build(1);
    process.env.AGENT_GATEWAY_IMAGE = tag;
    resetEnvCache();
    const userId = "usr_inplace";
    await ensureUser(userId);
    const row = await ensureInstanceRecord(userId);
    const ids = [first];
    try {
      const created = await ensureContainer(row);
      expect(created.imageId).toBe(first);
      await rt.exec(row.container_name, ["sh", "-c", "echo kept > /home/node/.openclaw/marker"]);

      // gateway/build.sh rebuilds under the same tag when its inputs change.
      const second = build(2);
      ids.push(second);
      expect(second).not.toBe(first);
      // Start, restart, a healed crash: the same container, still on its image.
      const kept = await ensureContainer((await getInstance(row.id))!);
      expect(kept).toMatchObject({ id: created.id, imageId: first });
      // Repair recreates the container, on the same image (by id: the tag names the new build).
      const repaired = await ensureContainer((await getInstance(row.id))!, { recreate: true });
      expect(repaired.id).not.toBe(created.id);
      expect(repaired).toMatchObject({ imageId: first, image: first });
      expect((await getInstance(row.id))?.image_id).toBe(first);

      // The update moves it to the new build, keeping the volume.
      expect(await updateImage(row.id)).toMatchObject({ updated: tag, imageId: second });
      const updated = await rt.inspect(row.container_name);
      expect(updated).toMatchObject({ imageId: second, image: tag, running: true });
      expect((await getInstance(row.id))?.image_id).toBe(second);
      const marker = await rt.exec(row.container_name, ["cat", "/home/node/.openclaw/marker"]);
      expect(marker.stdout).toBe("kept\n");
      expect(await updateImage(row.id)).toEqual({ unchanged: tag });

      // A broken rebuild under the same tag: back to the build that ran, not to the tag.
      const third = build(3, [BROKEN_CMD]);
      ids.push(third);
      const result = await updateImage(row.id);
      expect(result).toMatchObject({ rolledBack: tag, imageId: second });
      const back = await rt.inspect(row.container_name);
      expect(back).toMatchObject({ imageId: second, image: second, running: true });
      const after = await getInstance(row.id);
      expect(after).toMatchObject({ image: tag, image_id: second });
      expect(after?.last_error).toMatch(/failed.*rolled back to .* \(sha256:/);
      // Docker shows a crashed container waiting for its restart as running: the wait saw the
      // crash and did not sit out its whole bound (60 s here).
      expect(after?.last_error).not.toMatch(/within \d+ ms/);
      expect(
        (await rt.exec(row.container_name, ["cat", "/home/node/.openclaw/marker"])).stdout,
      ).toBe("kept\n");
    } finally {
      await rt.remove(row.container_name).catch(() => {});
      removeImages(tag, ...ids);
      process.env.AGENT_GATEWAY_IMAGE = SLEEPER_IMAGE;
      process.env.GATEWAY_HEALTH_TIMEOUT_MS = "3000";
      resetEnvCache();
    }
  }, 180_000);

  it("an update to an image that is not built touches nothing and says why", async () => {
    const userId = "usr_update_missing";
    await ensureUser(userId);
    const row = await ensureInstanceRecord(userId);
    const running = await ensureContainer(row);
    process.env.AGENT_GATEWAY_IMAGE = `agent-platform-test-missing:${testRun}`;
    resetEnvCache();
    try {
      const reason = `update to agent-platform-test-missing:${testRun} failed: the image is not built`;
      expect(await updateImage(row.id)).toEqual({ failed: reason });
      expect(await rt.inspect(row.container_name)).toMatchObject({ id: running.id, running: true });
      expect((await getInstance(row.id))?.last_error).toBe(reason);
    } finally {
      process.env.AGENT_GATEWAY_IMAGE = SLEEPER_IMAGE;
      resetEnvCache();
    }
  }, 60_000);
});
