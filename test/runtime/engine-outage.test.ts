import { availableParallelism } from "node:os";
import { afterAll, beforeAll, expect, it } from "vitest";
import * as agentsRoute from "../../app/routes/api.agents.ts";
import * as statsRoute from "../../app/routes/api.instance.$userId.stats.ts";
import * as getInstanceRoute from "../../app/routes/api.instance.$userId.ts";
import * as updateRoute from "../../app/routes/api.instance.$userId.update.ts";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import { engineHealth } from "../../app/server/agents/engine-health.server.ts";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { beginRun, failRun } from "../../app/server/agents/progress.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { getBoss } from "../../app/server/platform/jobs.server.ts";
import { ensureContainer } from "../../worker/instances/container.ts";
import { GATEWAY_PORT } from "../../worker/instances/engine.ts";
import { checkEngine, startEngineWatch } from "../../worker/instances/engine-watch.ts";
import { observe } from "../../worker/instances/observe.ts";
import { reconcileAll } from "../../worker/instances/reconcile.ts";
import { sampleAll } from "../../worker/instances/sampler.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { DockerRuntime, isStaleTask } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { LABELS, StaleTaskError } from "../../worker/runtime/types.ts";
import { subscribe } from "../agents/support.ts";
import { call, type RouteModule } from "../helpers/api.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import { buildStandin, type DedicatedDockerd, dedicatedDockerd } from "./dedicated-dockerd.ts";
import { allowDockerNetworks, describeDocker, testRun, waitFor } from "./docker-support.ts";

// Issue 24, fault 3: the Docker engine goes down under a running instance. A dockerd of the
// test's own is stopped and started again (the runtime points at it with DOCKER_HOST): while it
// is down the instance reports `unknown` and stale stats, an update answers 502, reconcile
// fails per instance without stopping; once it is back the exited container is reconciled at
// once, and the end state is one running container, no one-shot left, a truthful status.

let dockerd: DedicatedDockerd;
let rt: DockerRuntime;
let stopWatch: () => void = () => {};
const userId = `usr_engine_${testRun}`.replace(/-/g, "_");

const as = async (m: unknown, url: string, method = "GET", params = { userId }) =>
  call(m as RouteModule, url, {
    method,
    params,
    headers: { cookie: await sessionCookieFor(userId) },
  });

async function instance(): Promise<InstanceRow> {
  const row = await ensureInstanceRecord(userId);
  return (await getInstance(row.id)) as InstanceRow;
}

it("tells the engine's stale-task refusal from other failures to start", () => {
  // As docker-modem gives the engine's answer seen in the soak (decision 0239).
  const answer = (status: number, message: string) =>
    Object.assign(new Error(`(HTTP code ${status}) server error - ${message} `), {
      statusCode: status,
    });
  const task = "15503e1f0cb0651e4e30ae71dd978d8711f5f87f3f965e99feb528898c0f8e96";
  expect(isStaleTask(answer(500, `task ${task}: already exists`))).toBe(true);
  expect(isStaleTask(answer(500, "OCI runtime create failed: unable to start container"))).toBe(
    false,
  );
  expect(isStaleTask(answer(409, `task ${task}: already exists`))).toBe(false);
});

/** The instance's progress runs so far (a restart by reconcile begins one). */
async function progressRuns(): Promise<number> {
  const [row] = await db()<{ n: number }[]>`
    select count(*)::int as n from instance_runs where instance_id = ${(await instance()).id}`;
  return row?.n ?? 0;
}

describeDocker("the container engine down and back (a dedicated dockerd)", () => {
  beforeAll(async () => {
    dockerd = await dedicatedDockerd(testRun.slice(-6));
    await dockerd.start();
    Object.assign(process.env, {
      DOCKER_HOST: dockerd.host,
      RUNTIME_DEPLOYMENT: testRun,
      RUNTIME_NETWORK: `agent-test-${testRun}`,
      AGENT_GATEWAY_IMAGE: await buildStandin(dockerd),
      ENGINE_CHECK_INTERVAL_MS: "300",
      RECONCILE_CRON: "0 0 1 1 *", // only the engine's return reconciles in this file
      RUNTIME_POOL_CRON: "0 0 1 1 *",
      AGENT_MESSAGE_RECORDER: "off",
    });
    delete process.env.DOCKER_SOCKET;
    resetEnvCache();
    rt = new DockerRuntime({ maxCpus: 1 }); // from DOCKER_HOST
    setRuntime(rt);
    allowDockerNetworks();
    await subscribe(userId, "solo");
    await createAgentRecord(userId, { name: "outage", model: "openai/gpt-4o-mini" });
    await startWorker();
  }, 120_000);

  afterAll(async () => {
    stopWatch();
    await stopWorker(1000);
    setRuntime(undefined);
    await dockerd?.destroy();
    delete process.env.DOCKER_HOST;
  }, 60_000);

  it("reports unknown and stale while down, refuses the update, heals at once when back", async () => {
    // Up: a running instance, observed and sampled.
    const row = await instance();
    // While a provisioning is under way it, not the observation, says when chats can reach the
    // gateway (it pairs first): healthy but unpaired is still starting.
    await beginRun(row.id, "provision");
    await ensureContainer(row);
    await waitFor(async () => (await observe(await instance())).health === "healthy", {
      what: "the stand-in healthy",
    });
    expect((await instance()).observed_state).toBe("starting");
    await failRun(row.id);
    expect((await observe(await instance())).observed_state).toBe("running");
    await sampleAll();
    expect(await checkEngine()).toBe("returned"); // the first check also reconciles
    // An engine without live-restore is recorded as such (decision 0239).
    expect((await engineHealth())?.liveRestore).toBe(false);
    // And its host's CPUs, which size the chat-turn budget (decision 0251).
    expect((await db()<{ cpus: number }[]>`select cpus from runtime_engines`)[0]?.cpus).toBe(
      availableParallelism(),
    );
    expect((await as(getInstanceRoute, `/api/instance/${userId}`)).json.status).toBe("running");
    expect((await as(statsRoute, `/api/instance/${userId}/stats`)).json.stale).toBe(false);

    // Down: the engine stops (its containers with it).
    await dockerd.stop();
    expect(await checkEngine()).toBe("lost");
    expect((await engineHealth())?.reachable).toBe(false);
    const got = await as(getInstanceRoute, `/api/instance/${userId}`);
    expect(got.json.status).toBe("unknown");
    const stats = await as(statsRoute, `/api/instance/${userId}/stats`);
    expect(stats.json).toMatchObject({ status: "unknown", stale: true, cpu: "0.00%" });
    const agents = await as(agentsRoute, "/api/agents", "GET", {} as { userId: string });
    expect(agents.json.agents.map((a: { status: string }) => a.status)).toEqual(["unknown"]);
    const update = await as(updateRoute, `/api/instance/${userId}/update`, "POST");
    expect(update.status).toBe(502);
    expect(update.json).toMatchObject({ success: false, status: "error" });
    // Reconcile answers per instance instead of failing as a whole.
    const pass = await reconcileAll();
    expect(pass.instances[row.id]).toMatch(/^unavailable/);
    expect((await instance()).observed_state).toBe("unknown");

    // Back: the watcher sees it and a reconcile pass heals the exited container at once.
    stopWatch = startEngineWatch();
    const back = Date.now();
    await dockerd.start();
    // Every state the agents API could show meanwhile (issue 52: `error` for ~10 s).
    const seen = new Set<string>();
    const healed = await waitFor(
      async () => {
        const now = await instance();
        seen.add(now.observed_state);
        return now.observed_state === "running" || now.observed_state === "starting"
          ? now
          : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100, what: "the instance reconciled after the engine" },
    );
    const reconciledMs = Date.now() - back;
    await waitFor(async () => (await observe(await instance())).observed_state === "running", {
      what: "the healed stand-in healthy",
    });
    // The engine's shutdown stopped the gateway: not the gateway's error, nor a crash to back
    // off from.
    expect([...seen].filter((s) => !["unknown", "starting", "running"].includes(s))).toEqual([]);
    const after = await instance();
    expect(after.last_error ?? "").not.toMatch(/exited with code/);
    expect(after.crash_restarts).toBe(0);
    // Figures for the report: how long after dockerd answered the instance was handled.
    process.stdout.write(`engine back → instance ${healed.observed_state} in ${reconciledMs} ms\n`);
    expect(reconciledMs).toBeLessThan(15_000);
    // It was the engine's return that queued a reconcile pass (the cron is off in this file).
    await waitFor(
      async () =>
        (await (await getBoss()).findJobs("reconcile")).some(
          (j) => j.createdOn.getTime() >= back && j.state === "completed",
        ),
      { timeoutMs: 15_000, what: "a reconcile pass queued by the engine's return" },
    );
    expect((await engineHealth())?.reachable).toBe(true);
    // The restart runs in its own job (decision 0240): its run ends when the job has seen the
    // gateway healthy, which may come just after the test's own observation.
    await waitFor(
      async () => (await as(getInstanceRoute, `/api/instance/${userId}`)).json.status === "running",
      { timeoutMs: 30_000, what: "the status running once the restart's run ended" },
    );
    const containers = await rt.docker.listContainers({ all: true });
    const gateways = containers.filter((c) => c.Labels[LABELS.instanceId] === row.id);
    expect(gateways.map((c) => [c.Labels[LABELS.role], c.State])).toEqual([["gateway", "running"]]);
    expect(containers.filter((c) => c.Labels[LABELS.role] === "one-shot")).toEqual([]);
    // And the update is accepted again.
    const accepted = await as(updateRoute, `/api/instance/${userId}/update`, "POST");
    expect(accepted.status).toBe(200);
  }, 180_000);

  it("with live-restore, the gateway answers while the engine is down and is not restarted", async () => {
    // Decision 0239: the engine started again with live-restore (the watcher still runs and
    // sees it gone first, so its return re-reads the setting at once).
    await dockerd.stop();
    await waitFor(async () => (await engineHealth())?.reachable === false, {
      what: "the engine's loss seen",
    });
    await dockerd.start(["--live-restore"]);
    await waitFor(async () => (await engineHealth())?.liveRestore === true, {
      what: "live-restore recorded when the engine answered again",
    });
    await waitFor(async () => (await observe(await instance())).observed_state === "running", {
      what: "the stand-in running again",
    });
    const before = await rt.inspect((await instance()).container_name);
    const address = before?.address;
    expect(before?.running && address).toBeTruthy();
    const runs = await progressRuns();

    await dockerd.stop();
    await waitFor(async () => (await engineHealth())?.reachable === false, {
      what: "the engine's loss seen",
    });
    // The gateway goes on: its process lives, and it answers on its address.
    const health = await fetch(`http://${address}:${GATEWAY_PORT}/healthz`);
    expect(health.status).toBe(200);

    await dockerd.start(["--live-restore"]);
    await waitFor(async () => (await instance()).observed_state === "running", {
      what: "the instance observed running after the engine's return",
    });
    const after = await rt.inspect((await instance()).container_name);
    expect(after?.id).toBe(before?.id);
    expect(after?.startedAt).toBe(before?.startedAt); // not restarted
    expect((await instance()).crash_restarts).toBe(0);
    expect(await progressRuns()).toBe(runs); // no restart run began
  }, 180_000);

  it("makes the container again when the engine kept its old task", async () => {
    // After an engine restart the soak met a container the engine would not start again
    // ("task …: already exists", decision 0239): a new container on the same volume starts.
    const before = await rt.inspect((await instance()).container_name);
    if (!before) throw new Error("no container");
    await rt.stop(before.id, 5);
    let refused = 0;
    const kept = new (class extends DockerRuntime {
      override async start(id: string): Promise<void> {
        if (id === before?.id) {
          refused += 1;
          throw new StaleTaskError(`task ${id}: already exists`);
        }
        return super.start(id);
      }
    })({ maxCpus: 1 });
    setRuntime(kept);
    try {
      const started = await ensureContainer(await instance());
      expect(refused).toBe(1);
      expect(started.id).not.toBe(before.id);
      expect(started.running).toBe(true);
      expect(await rt.inspect(before.id)).toBeUndefined();
      expect((await instance()).container_id).toBe(started.id);
      expect(
        (await rt.docker.getContainer(started.id).inspect()).Mounts.map((m) => m.Name),
      ).toEqual(expect.arrayContaining([(await instance()).volume_name]));
    } finally {
      setRuntime(rt);
    }
  }, 120_000);
});
