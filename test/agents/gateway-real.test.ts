import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureInstanceRecord, getInstance } from "../../app/server/agents/instances.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { connectPaired, provision } from "../../worker/instances.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import {
  allowDockerNetworks,
  cleanupTestObjects,
  describeDocker,
  testRun,
} from "../runtime/docker-support.ts";

// The real OpenClaw gateway in a container: provision (volume, config, container, pairing by
// `devices approve` inside the container, /healthz), then the control protocol over the
// bridge network: hello-ok version, health, config.get/config.patch.

const rt = new DockerRuntime({ maxCpus: 1 });

describeDocker("real gateway", () => {
  beforeAll(() => {
    process.env.RUNTIME_DEPLOYMENT = testRun;
    process.env.RUNTIME_NETWORK = `agent-test-${testRun}`;
    resetEnvCache();
    setRuntime(rt);
    allowDockerNetworks();
  });
  afterAll(async () => {
    setRuntime(undefined);
    await cleanupTestObjects(rt);
  });

  it("provisions, pairs, answers health and version, takes a config patch", async () => {
    const row = await ensureInstanceRecord("usr_gateway_real", { plan: "solo" });
    const result = await provision(row.id);
    expect(result).toMatchObject({
      instanceId: row.id,
      version: expect.stringMatching(/2026\.9\.6/),
    });
    process.stdout.write(`provision timings ${JSON.stringify(result)}\n`);
    const after = await getInstance(row.id);
    expect(after).toMatchObject({ observed_state: "running", health: "healthy" });
    expect(after?.device_token_sealed ?? after?.paired_at).toBeTruthy();

    // Provisioning again creates nothing new (same container).
    const again = await provision(row.id);
    expect((await getInstance(row.id))?.container_id).toBe(after?.container_id);
    expect(again).toMatchObject({ instanceId: row.id });

    const { client, hello } = await connectPaired(after!, after!.gateway_address!);
    try {
      expect(hello.server.version).toMatch(/2026\.9\.6/);
      expect(hello.auth?.scopes).toContain("operator.admin");
      const health = await client.request<{ ok?: boolean }>("health");
      expect(health).toBeTruthy();
      const cfg = await client.request<{ hash: string; config?: Record<string, unknown> }>(
        "config.get",
      );
      expect(cfg.hash).toBeTruthy();
      const patched = await client.request(
        "config.patch",
        {
          baseHash: cfg.hash,
          raw: JSON.stringify({ agents: { defaults: { timeoutSeconds: 123 } } }),
        },
        { timeoutMs: 30_000 },
      );
      expect(patched).toBeTruthy();
      const cfg2 = await client.request<{
        hash: string;
        config?: { agents?: { defaults?: { timeoutSeconds?: number } } };
      }>("config.get");
      expect(cfg2.hash).not.toBe(cfg.hash);
    } finally {
      client.close();
    }
  }, 300_000);
});
