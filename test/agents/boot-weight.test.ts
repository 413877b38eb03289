import { afterAll, beforeAll, expect, it } from "vitest";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { settleBootWeight, weighForBoot } from "../../worker/instances/boot-weight.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { limitsForPlan, setRuntime } from "../../worker/runtime/index.ts";
import {
  cleanupTestObjects,
  describeDocker,
  GATEWAY_IMAGE,
  testLabels,
  testRun,
} from "../runtime/docker-support.ts";

// Decision 0250: a booting gateway weighs BOOT_CPU_WEIGHT times its plan's CPU shares, and its
// plan's again once it answers /healthz or has run past its health bound. A container running
// `sleep` stands in for the gateway: the weight is the engine's, whatever runs inside.

const rt = new DockerRuntime({ maxCpus: 1 });
const network = `agent-test-${testRun}`;
const row = { id: `ins_${testRun}_w`, plan: "collective" }; // 2048 shares
const shares = async (id: string) => (await rt.inspect(id))?.limits.cpuShares;

describeDocker("boot CPU weight", () => {
  let id: string;
  beforeAll(async () => {
    process.env.BOOT_CPU_WEIGHT = "8";
    resetEnvCache();
    setRuntime(rt);
    await rt.ensureNetwork(network, testLabels());
    const volume = `agent-${row.id}-state`;
    await rt.ensureVolume(volume, testLabels());
    id = await rt.create({
      instanceId: row.id,
      userId: `usr_${testRun}_w`,
      image: GATEWAY_IMAGE,
      hostname: `agent-${row.id}`.slice(0, 63),
      name: `agent-${row.id}`,
      volume,
      volumeTarget: "/home/node/.openclaw",
      network,
      limits: limitsForPlan(row.plan),
      env: { OPENCLAW_GATEWAY_TOKEN: "instance-own-token" },
      cmd: ["sleep", "600"],
      labels: testLabels(),
    });
  });
  afterAll(async () => {
    delete process.env.BOOT_CPU_WEIGHT;
    delete process.env.GATEWAY_HEALTH_TIMEOUT_MS;
    resetEnvCache();
    setRuntime(undefined);
    await cleanupTestObjects(rt);
  });

  it("weighs a boot eight times its plan's, keeps it while it boots, and its plan's once healthy", async () => {
    expect(await shares(id)).toBe(2048);
    // Set on the created container, before its start: the boot's first instruction weighs it.
    await weighForBoot(row, id);
    expect(await shares(id)).toBe(16_384);
    await rt.start(id);
    const booting = await rt.inspect(id);
    expect(booting?.limits.cpuShares).toBe(16_384);

    // Running, not answering yet, inside its health bound: still weighed for the boot.
    await settleBootWeight(row, booting!, false);
    expect(await shares(id)).toBe(16_384);
    // Healthy: its plan's.
    await settleBootWeight(row, booting!, true);
    expect(await shares(id)).toBe(2048);
    // A second settle changes nothing (no engine call for a gateway at its plan's weight).
    await settleBootWeight(row, (await rt.inspect(id))!, true);
    expect(await shares(id)).toBe(2048);
  });

  it("takes the weight back from a boot that ran past its health bound, or stopped", async () => {
    process.env.GATEWAY_HEALTH_TIMEOUT_MS = "1000";
    resetEnvCache();
    await weighForBoot(row, id);
    const info = (await rt.inspect(id))!;
    expect(info.limits.cpuShares).toBe(16_384);
    const started = new Date(Date.now() - 5_000).toISOString();
    await settleBootWeight(row, { ...info, startedAt: started }, false);
    expect(await shares(id)).toBe(2048);

    await weighForBoot(row, id);
    await rt.stop(id, 1);
    await settleBootWeight(row, (await rt.inspect(id))!, false);
    expect(await shares(id)).toBe(2048);
  });

  it("BOOT_CPU_WEIGHT=1 (the default) boots at the plan's weight", async () => {
    delete process.env.BOOT_CPU_WEIGHT;
    resetEnvCache();
    await weighForBoot(row, id);
    expect(await shares(id)).toBe(2048);
  });
});
