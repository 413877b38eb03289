import { afterAll, beforeAll, expect, it } from "vitest";
import { seal } from "../../app/server/platform/crypto.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { sendJob } from "../../app/server/platform/jobs.server.ts";
import { DEPLOYMENT_LABEL } from "../../worker/instances/engine.ts";
import { fillOwner } from "../../worker/instances/pool-dead-fills.ts";
import { fillPool } from "../../worker/instances/pool-fill.ts";
import { reconcileAll } from "../../worker/instances/reconcile.ts";
import { runAsJob } from "../../worker/jobs/context.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import {
  cleanupTestObjects,
  describeDocker,
  ensureSleeperImage,
  testLabels,
  testRun,
} from "./docker-support.ts";

// Issue 52, finding 1: a worker killed (or stopped) while filling the warm pool left its pooled
// row 'starting' for 20 minutes, its container running, and no other pooled gateway started
// meanwhile. The row records the fill-pool attempt; once that attempt is over (the heartbeat
// monitor fails a dead worker's job within seconds) the next fill or reconcile discards it.
// No gateway boots here: the pooled container is a `sleep` stand-in, as a filler that died
// before the gateway answered leaves it.

const rt = new DockerRuntime({ maxCpus: 1 });

/** A fill-pool job in the given pg-boss state (as the monitor leaves a dead worker's: failed). */
async function fillJob(state: "active" | "failed") {
  const id = await sendJob("fill-pool", {});
  await db()`update pgboss.job set state = ${state}, started_on = now() where id = ${id}`;
  return id;
}

/** What startPooledGateway leaves when its worker dies mid-way: the row and a running container. */
async function pooledByJob(jobId: string, n: string) {
  const id = `gwp_dead${n}${testRun.slice(-6)}`.replace(/[^a-z0-9_]/gi, "x");
  const name = `agent-${id}`;
  const labels = { ...testLabels(), [DEPLOYMENT_LABEL]: testRun, "agent-platform.pool": "1" };
  await rt.docker.createVolume({ Name: `${name}-state`, Labels: labels });
  const container = await rt.docker.createContainer({
    name,
    Image: ensureSleeperImage(),
    Labels: labels,
  });
  await container.start();
  const owner = await runAsJob({ name: "fill-pool", id: jobId, retryCount: 0 }, async () =>
    fillOwner(),
  );
  await db()`insert into gateway_pool (id, container_name, volume_name, image,
      gateway_token_sealed, fill_job, fill_job_id, fill_job_attempt)
    values (${id}, ${name}, ${`${name}-state`}, ${ensureSleeperImage()}, ${seal("t")},
      ${owner.fill_job}, ${owner.fill_job_id}, ${owner.fill_job_attempt})`;
  return { id, name };
}

const rowExists = async (id: string) =>
  (await db()`select 1 from gateway_pool where id = ${id}`).length === 1;

describeDocker("a pooled gateway whose fill died", () => {
  beforeAll(() => {
    Object.assign(process.env, {
      RUNTIME_DEPLOYMENT: testRun,
      RUNTIME_NETWORK: `agent-test-${testRun}`,
      AGENT_GATEWAY_IMAGE: ensureSleeperImage(),
      RUNTIME_POOL_SIZE: "0", // the fill below starts nothing: only its discarding is tested
    });
    resetEnvCache();
    setRuntime(rt);
  });
  afterAll(async () => {
    setRuntime(undefined);
    await cleanupTestObjects(rt);
  });

  it("is discarded by the next reconcile pass, container and volume with it", async () => {
    const dead = await pooledByJob(await fillJob("failed"), "a");
    const live = await pooledByJob(await fillJob("active"), "b");
    const pass = await reconcileAll();
    expect(pass.deadFillsDiscarded).toEqual([dead.id]);
    expect(await rowExists(dead.id)).toBe(false);
    expect(await rt.inspect(dead.name)).toBeUndefined();
    expect(
      (await rt.docker.listVolumes({ filters: { name: [`${dead.name}-state`] } })).Volumes,
    ).toEqual([]);
    // A fill still under way keeps its gateway.
    expect(await rowExists(live.id)).toBe(true);
    expect((await rt.inspect(live.name))?.running).toBe(true);
  });

  it("is discarded by the next fill too", async () => {
    const job = await fillJob("active");
    const dead = await pooledByJob(job, "c");
    // The worker died: the heartbeat monitor failed its attempt.
    await db()`update pgboss.job set state = 'failed' where id = ${job}`;
    const filled = await fillPool();
    expect(filled.discarded).toContain(dead.id);
    expect(await rowExists(dead.id)).toBe(false);
    expect(await rt.inspect(dead.name)).toBeUndefined();
  });
});
