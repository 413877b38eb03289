import path from "node:path";
import { http, passthrough, ws } from "msw";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { runAction } from "../../worker/instances/actions.ts";
import { observe } from "../../worker/instances/observe.ts";
import { connectPaired } from "../../worker/instances/pairing.ts";
import { provision } from "../../worker/instances/provision.ts";
import { sampleAll } from "../../worker/instances/sampler.ts";
import { measureStorage } from "../../worker/instances/storage.ts";
import { teardown } from "../../worker/instances/teardown.ts";
import { processRuntime, setRuntime } from "../../worker/runtime/index.ts";
import { installOpenclaw, PINNED_OPENCLAW, repo } from "../../worker/runtime/openclaw-install.ts";
import type { ProcessRuntime } from "../../worker/runtime/process.ts";
import { ensureUser } from "../helpers/users.ts";
import { mswServer } from "../msw/server.ts";
import { gatewayBuildFinished } from "../setup/gateway-build.ts";

// The process driver with the real pinned OpenClaw gateway as a local process (no Docker):
// provision (config written into the state folder, own loopback port, pairing approved over it),
// the control protocol, stats, stop/start, teardown. Installs OpenClaw under .data/openclaw
// once when neither that nor the image build's copy exists.

let rt: ProcessRuntime;
let row: InstanceRow;
const userId = `usr_process_${process.pid}`;

beforeAll(async () => {
  // On CI, gateway/build.sh may still be installing the copy of OpenClaw this can reuse.
  await gatewayBuildFinished();
  await installOpenclaw(
    (line) => process.stdout.write(`${line}\n`),
    path.join(repo, ".data/openclaw", PINNED_OPENCLAW),
  );
  process.env.RUNTIME_DEPLOYMENT = `proc-${process.pid}`;
  resetEnvCache();
  rt = processRuntime(path.join(process.env.DATA_DIR as string, "runtime"));
  setRuntime(rt);
  const loopback = /^(http|ws):\/\/127\.0\.0\.1:\d+/;
  mswServer.use(
    http.all(loopback, () => passthrough()),
    ws.link(loopback).addEventListener("connection", ({ server }) => server.connect()),
  );
  await ensureUser(userId);
  row = await ensureInstanceRecord(userId, { plan: "solo" });
}, 300_000);

afterAll(async () => {
  await teardown(userId).catch(() => {});
  setRuntime(undefined);
});

describe("process driver", () => {
  it("provisions a real gateway as a local process and drives it", async () => {
    const result = await provision(row.id);
    expect(result).toMatchObject({
      instanceId: row.id,
      version: expect.stringMatching(/2026\.9\.6/),
    });
    process.stdout.write(`process driver provision ${JSON.stringify(result)}\n`);
    const running = (await getInstance(row.id)) as InstanceRow;
    expect(running).toMatchObject({
      driver: "process",
      observed_state: "running",
      health: "healthy",
    });
    expect(running.gateway_address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(running.gateway_address).not.toBe("127.0.0.1:18789");

    // The operator protocol over the paired device: health and the platform's config.
    const { client, hello } = await connectPaired(running, running.gateway_address!);
    try {
      expect(hello.server.version).toMatch(/2026\.9\.6/);
      await client.request("health");
      const cfg = await client.request<{ hash: string; config?: Record<string, unknown> }>(
        "config.get",
      );
      expect(cfg.hash).toBeTruthy();
      expect(JSON.stringify(cfg.config)).toContain("/api/ai/v1");
      // No host PTY through the control protocol (it would be the worker's own machine here).
      expect(cfg.config).toMatchObject({ gateway: { terminal: { enabled: false } } });
      await expect(client.request("terminal.open", { agentId: "main" })).rejects.toThrow();
    } finally {
      client.close();
    }

    // Its environment is the spec's, not the worker's: no platform secret leaks in.
    const info = await rt.inspect(running.container_name);
    expect(info?.running).toBe(true);
    const spec = info!.env.join(" ");
    expect(spec).not.toMatch(/DATABASE_URL|SEALING_KEY|SESSION_SECRET/);

    expect(await sampleAll()).toBe(1);
    const sampled = (await getInstance(row.id)) as InstanceRow;
    expect(sampled.memory_bytes).toBeGreaterThan(50 * 1024 ** 2);
    expect(sampled.pids).toBeGreaterThanOrEqual(1);
    expect(await measureStorage()).toBe(1);
    expect((await getInstance(row.id))?.storage_bytes).toBeGreaterThan(0);

    // A copy's pause stops the process group; its release, or a start when the release never
    // came (a worker that died), lets it run again.
    const release = await rt.pauseForCopy(running.container_name);
    expect(await rt.inspect(running.container_name)).toMatchObject({
      state: "paused",
      running: false,
    });
    await release();
    expect((await rt.inspect(running.container_name))?.state).toBe("running");
    await rt.pauseForCopy(running.container_name);
    await rt.start(running.container_name);
    expect((await rt.inspect(running.container_name))?.state).toBe("running");
    const again = await connectPaired(running, running.gateway_address!);
    await again.client.request("health");
    again.client.close();

    // Stop, then start again from the same state folder.
    await runAction(sampled, "stop");
    expect((await observe((await getInstance(row.id))!)).observed_state).toBe("stopped");
    await runAction((await getInstance(row.id))!, "start");
    await expect
      .poll(async () => (await observe((await getInstance(row.id))!)).observed_state, {
        timeout: 120_000,
        interval: 500,
      })
      .toBe("running");

    // Teardown removes the process, its spec and its state.
    await teardown(userId);
    expect(await rt.inspect(running.container_name)).toBeUndefined();
    expect(await rt.volumeExists(running.volume_name)).toBe(false);
  }, 300_000);
});
