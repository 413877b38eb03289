import { afterAll, beforeAll, expect, it } from "vitest";
import {
  ensureInstanceRecord,
  gatewayTokenOf,
  getInstance,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { GatewayClient } from "../../app/server/openclaw/client.server.ts";
import { deviceIdentityFromPrivateKey } from "../../app/server/openclaw/device-identity.server.ts";
import { unseal } from "../../app/server/platform/crypto.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { runAction } from "../../worker/instances/actions.ts";
import { STATE_DIR } from "../../worker/instances/engine.ts";
import { waitHealthy } from "../../worker/instances/health.ts";
import { connectPaired } from "../../worker/instances/pairing.ts";
import { provision } from "../../worker/instances/provision.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import type { ContainerInfo } from "../../worker/runtime/types.ts";
import { ensureUser } from "../helpers/users.ts";
import {
  allowDockerNetworks,
  cleanupTestObjects,
  describeDocker,
  GATEWAY_IMAGE,
  testRun,
  waitFor,
} from "../runtime/docker-support.ts";

// The real OpenClaw gateway in a container: provision (volume, config, container, pairing
// approved over the gateway's loopback inside the container, /healthz), then the control
// protocol over the bridge network: hello-ok version, health, config.get/config.patch; then reset-memory,
// stop/start with a client that reconnects by itself, and repair, with their timings. (Each
// boot costs ~20 CPU-seconds; an image update boots the gateway in state-real.test.ts.)

const rt = new DockerRuntime({ maxCpus: 1 });
const timings: Record<string, number | string | undefined> = {};

describeDocker("real gateway", () => {
  beforeAll(() => {
    process.env.RUNTIME_DEPLOYMENT = testRun;
    process.env.RUNTIME_NETWORK = `agent-test-${testRun}`;
    // A restart answers once /healthz does, bounded by the web's wait (60 s); a loaded CI's
    // gateway took longer once. The bound itself is not what this file tests.
    process.env.INSTANCE_ACTION_TIMEOUT_MS = "180000";
    resetEnvCache();
    setRuntime(rt);
    allowDockerNetworks();
  });
  afterAll(async () => {
    setRuntime(undefined);
    await cleanupTestObjects(rt);
  });

  it("provisions, pairs, answers health and version, takes a config patch", async () => {
    await ensureUser("usr_gateway_real");
    const row = await ensureInstanceRecord("usr_gateway_real", { plan: "solo" });
    const result = await provision(row.id);
    timings.provisionHealthyMs = result.healthyMs as number;
    timings.provisionReadyMs = result.readyMs as number;
    expect(result).toMatchObject({
      instanceId: row.id,
      version: expect.stringMatching(/2026\.9\.6/),
    });
    process.stdout.write(`provision timings ${JSON.stringify(result)}\n`);
    const after = await getInstance(row.id);
    expect(after).toMatchObject({ observed_state: "running", health: "healthy" });
    expect(after?.device_token_sealed ?? after?.paired_at).toBeTruthy();
    // The gateway answers on the private network only: no host port is published, so the
    // agent ingress (decision 0115) is the only way in from outside.
    const published = await rt.inspect(after!.container_name);
    expect(published?.ports).toEqual({});
    expect(after?.gateway_address).toBe(`${published?.address}:18789`);

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
      const cfg = await client.request<{
        hash: string;
        config?: {
          agents?: { defaults?: { heartbeat?: unknown } };
          gateway?: { controlUi?: { root?: string } };
        };
      }>("config.get");
      expect(cfg.hash).toBeTruthy();
      // The Control UI is served from the image's copy (decision 0187), which the image names.
      const uiRoot = await rt.controlUiRoot(GATEWAY_IMAGE);
      expect(uiRoot).toMatch(/^\/opt\/openclaw\/.+\/control-ui$/);
      expect(cfg.config?.gateway?.controlUi?.root).toBe(uiRoot);
      // No recurring heartbeat until the user turns it on (decision 0091).
      expect(cfg.config?.agents?.defaults?.heartbeat).toEqual({ every: "0m" });
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

    // reset-memory through the gateway: sessions, MEMORY.md and the daily notes are gone.
    const remembered = (await getInstance(row.id)) as InstanceRow;
    const { client: mem } = await connectPaired(remembered, remembered.gateway_address as string);
    try {
      await mem.request("sessions.create", { agentId: "main" });
      await mem.request("agents.files.set", {
        agentId: "main",
        name: "MEMORY.md",
        content: "The user's cat is called Miso.",
      });
    } finally {
      mem.close();
    }
    const note = `${STATE_DIR}/workspace/memory/2026-11-22.md`;
    const wrote = await rt.exec(remembered.container_name, [
      "sh",
      "-c",
      `mkdir -p ${STATE_DIR}/workspace/memory && echo 'Miso likes tuna' > ${note}`,
    ]);
    expect(wrote.exitCode).toBe(0);
    const reset = await runAction(remembered, "reset-memory");
    expect(reset).toMatchObject({
      ok: true,
      message: expect.stringMatching(/Memory reset: 1 session\(s\) cleared, memory of 1 agent/),
    });
    const { client: check } = await connectPaired(remembered, remembered.gateway_address as string);
    try {
      const list = await check.request<{ sessions?: unknown[] }>("sessions.list", {});
      expect(list.sessions ?? []).toEqual([]);
      const file = await check.request<{ file?: { content?: string } }>("agents.files.get", {
        agentId: "main",
        name: "MEMORY.md",
      });
      expect(file.file?.content ?? "").toBe("");
    } finally {
      check.close();
    }
    expect((await rt.exec(remembered.container_name, ["test", "-e", note])).exitCode).toBe(1);

    // stop and start (the worker's actions), then healthy again; a client with reconnect on
    // comes back by itself once the gateway is up again.
    const current = (await getInstance(row.id)) as InstanceRow;
    const { device } = await connectPaired(current, current.gateway_address as string).then(
      ({ client: c, row: r }) => {
        c.close();
        return {
          device: deviceIdentityFromPrivateKey(unseal(r.device_private_key_sealed as string)),
        };
      },
    );
    const live = new GatewayClient({
      url: `ws://${current.gateway_address}`,
      token: gatewayTokenOf(current),
      device,
      reconnect: true,
    });
    try {
      const first = (await live.connect()).server.connId;
      let t = Date.now();
      expect(await runAction((await getInstance(row.id)) as InstanceRow, "stop")).toMatchObject({
        ok: true,
      });
      timings.stopMs = Date.now() - t;
      t = Date.now();
      await runAction((await getInstance(row.id)) as InstanceRow, "start");
      timings.startCallMs = Date.now() - t;
      const info = await rt.inspect(current.container_name);
      await waitHealthy(info as ContainerInfo);
      timings.startToHealthyMs = Date.now() - t;
      await waitFor(async () => live.hello?.server.connId !== first && live.hello, {
        timeoutMs: 180_000,
        intervalMs: 250,
        what: "the client to reconnect after the start",
      });
      timings.startToReconnectMs = Date.now() - t;
      expect(await live.request("health")).toBeTruthy();
    } finally {
      live.close();
    }

    // repair: new container on the same volume (paired device and state survive), config re-applied
    const t = Date.now();
    const repaired = await runAction((await getInstance(row.id)) as InstanceRow, "repair");
    timings.repairMs = Date.now() - t;
    expect(repaired).toMatchObject({ ok: true, message: expect.stringMatching(/repaired/) });
    const afterRepair = (await getInstance(row.id)) as InstanceRow;
    expect(afterRepair.container_id).not.toBe(after?.container_id);
    // Still paired on the new container, and the earlier config patch kept beside the
    // platform's re-applied part. (An image update, the other way a container is recreated on
    // the same volume, boots the real gateway in state-real.test.ts: 2026.9.5 → 2026.9.6.)
    const { client: onRepaired, hello: repairedHello } = await connectPaired(
      afterRepair,
      afterRepair.gateway_address as string,
    );
    try {
      expect(repairedHello.server.version).toMatch(/2026\.9\.6/);
      const cfg = await onRepaired.request<{
        config?: { agents?: { defaults?: { timeoutSeconds?: number } } };
      }>("config.get");
      expect(cfg.config?.agents?.defaults?.timeoutSeconds).toBe(123);
    } finally {
      onRepaired.close();
    }
    // The image's preload ran its one memory-reducing GC once the gateway went quiet (decision
    // 0154), and the idle figure below is taken after it.
    const settled = /agent-gateway: start-up garbage collected: (rss \d+ -> \d+ MiB in \d+ ms)/;
    await expect
      .poll(() => rt.logs(afterRepair.container_name, { tail: 400 }), { timeout: 120_000 })
      .toMatch(settled);
    timings.settled = settled.exec(await rt.logs(afterRepair.container_name, { tail: 400 }))?.[1];
    // Quiet by now, after three boots on this volume: none copied the Control UI into the state,
    // and the gateway serves it (decision 0187).
    const uiCache = `${STATE_DIR}/cache/control-ui-assets`;
    expect((await rt.exec(afterRepair.container_name, ["test", "-e", uiCache])).exitCode).toBe(1);
    const page = await fetch(`http://${afterRepair.gateway_address}/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("<openclaw-app");
    const stats = await rt.stats(afterRepair.container_name);
    timings.idleMemoryMiB = Math.round(stats.memoryBytes / 1024 ** 2);
    process.stdout.write(`gateway timings ${JSON.stringify(timings)}\n`);
  }, 600_000);
});
