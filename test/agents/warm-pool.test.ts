import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureInstanceRecord, getInstance } from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { connectPaired, provision, reconcileAll, teardown } from "../../worker/instances.ts";
import { fillPool } from "../../worker/pool.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import {
  allowDockerNetworks,
  cleanupTestObjects,
  describeDocker,
  testRun,
} from "../runtime/docker-support.ts";

// Warm pool with the real gateway: a pooled gateway is started and paired ahead of time; a
// provisioning adopts it (config patched for the tenant over the control protocol) instead of
// a cold start; reconcile leaves it alone; teardown removes it.

const rt = new DockerRuntime({ maxCpus: 1 });

describeDocker("warm pool (real gateway)", () => {
  beforeAll(() => {
    process.env.RUNTIME_DEPLOYMENT = testRun;
    process.env.RUNTIME_NETWORK = `agent-test-${testRun}`;
    process.env.RUNTIME_POOL_SIZE = "1";
    resetEnvCache();
    setRuntime(rt);
    allowDockerNetworks();
  });
  afterAll(async () => {
    setRuntime(undefined);
    await cleanupTestObjects(rt);
  });

  it("provisioning adopts a warm gateway in seconds; nothing is created twice", async () => {
    const filled = await fillPool();
    expect(filled.started).toHaveLength(1);
    expect((await fillPool()).started).toHaveLength(0); // full: nothing more
    const [pooled] = await db()<{ container_name: string; state: string }[]>`
      select container_name, state from gateway_pool`;
    expect(pooled?.state).toBe("ready");

    const row = await ensureInstanceRecord("usr_warm");
    const t0 = Date.now();
    const result = await provision(row.id);
    const ms = Date.now() - t0;
    process.stdout.write(`warm provision ${ms} ms ${JSON.stringify(result)}\n`);
    expect(result).toMatchObject({ adopted: pooled?.container_name });
    expect(ms).toBeLessThan(15_000);

    const adopted = await getInstance(row.id);
    expect(adopted).toMatchObject({
      container_name: pooled?.container_name,
      observed_state: "running",
      health: "healthy",
    });
    expect(await db()`select 1 from gateway_pool`).toHaveLength(0); // never back to the pool
    const { client, hello } = await connectPaired(adopted!, adopted!.gateway_address!);
    try {
      expect(hello.server.version).toMatch(/2026\.9\.6/);
      const cfg = await client.request<{ config?: { agents?: unknown; models?: unknown } }>(
        "config.get",
      );
      expect(JSON.stringify(cfg)).toContain("/api/ai/v1");
    } finally {
      client.close();
    }
    const live = await db()`select 1 from ai_instance_tokens
      where instance_id = ${row.id} and revoked_at is null`;
    expect(live).toHaveLength(1);

    const reconciled = await reconcileAll();
    expect(reconciled.orphansRemoved).toEqual([]);
    expect((await rt.inspect(adopted!.container_name))?.running).toBe(true);

    await teardown("usr_warm");
    expect(await rt.inspect(adopted!.container_name)).toBeUndefined();
    expect(await rt.volumeExists(adopted!.volume_name)).toBe(false);
  }, 300_000);
});
