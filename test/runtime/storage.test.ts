import { afterAll, beforeAll, expect, it } from "vitest";
import * as filesPage from "../../app/routes/files.tsx";
import { ensureInstanceRecord, getInstance } from "../../app/server/agents/instances.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { reconcileAll } from "../../worker/instances/reconcile.ts";
import { measureStorage } from "../../worker/instances/storage.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import {
  cleanupTestObjects,
  describeDocker,
  ensureSleeperImage,
  testLabels,
  testRun,
} from "../runtime/docker-support.ts";

// Storage used (the files dashboard) is the real size of the instance's state volume, measured
// by the worker's reconcile pass from the engine.

const rt = new DockerRuntime({ maxCpus: 1 });

describeDocker("storage used", () => {
  beforeAll(() => {
    process.env.RUNTIME_DEPLOYMENT = testRun;
    resetEnvCache();
    setRuntime(rt);
  });
  afterAll(async () => {
    setRuntime(undefined);
    await cleanupTestObjects(rt);
  });

  it("measures the state volume and the files page shows it", async () => {
    const userId = `usr_storage_${testRun}`;
    const cookie = await sessionCookieFor(userId);
    const row = await ensureInstanceRecord(userId);
    await rt.ensureVolume(row.volume_name, testLabels());
    const image = ensureSleeperImage();
    const wrote = await rt.runOnce({
      image,
      volume: row.volume_name,
      volumeTarget: "/data",
      user: "0:0", // a fresh volume's root belongs to root
      entrypoint: ["sh", "-c"],
      cmd: ["head -c 3145728 /dev/urandom > /data/blob && sync"],
      labels: testLabels(),
    });
    expect(wrote.exitCode).toBe(0);

    expect(await measureStorage()).toBeGreaterThanOrEqual(1);
    const measured = await getInstance(row.id);
    expect(measured?.storage_bytes).toBeGreaterThanOrEqual(3 * 1024 ** 2);
    expect(measured?.storage_measured_at).toBeInstanceOf(Date);

    const data = (await filesPage.loader({
      request: new Request("http://localhost/files", { headers: { cookie } }),
      params: {},
      context: {},
    })) as { usedBytes: number; usedGb: number; limitGb: number };
    expect(data.usedBytes).toBe(measured?.storage_bytes);
    expect(data.limitGb).toBeGreaterThan(0);
  });

  it("re-measures in reconcile only once a size is older than the interval", async () => {
    expect((await reconcileAll()).storageMeasured).toBe(0); // measured just now
    process.env.STORAGE_MEASURE_INTERVAL_MS = "0";
    resetEnvCache();
    try {
      expect((await reconcileAll()).storageMeasured).toBeGreaterThanOrEqual(1);
    } finally {
      delete process.env.STORAGE_MEASURE_INTERVAL_MS;
      resetEnvCache();
    }
  });
});
