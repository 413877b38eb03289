import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureInstanceRecord } from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import {
  removeVolumeOrDefer,
  retryVolumeRemovals,
} from "../../worker/instances/volume-removals.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import type { StorageQuota } from "../../worker/runtime/storage-quota.ts";
import { ensureUser } from "../helpers/users.ts";
import { buildStandin, type DedicatedDockerd, dedicatedDockerd } from "./dedicated-dockerd.ts";
import { describeDocker, testRun } from "./docker-support.ts";
import { testStorageRoot } from "./storage-support.ts";

// Docker before 20.10.25 (Debian's 20.10.24 here) loses the mount count of a bound volume whose
// container lives through a live-restore restart (moby#44422): once the container is gone, the
// engine answers "volume has active mounts" to the volume's removal until it restarts again. A
// limited state volume is such a volume (decision 0216). The soak met it on every agent after
// its engine fault: teardowns retried for good, restores failed after they had succeeded
// (decision 0248). On a dedicated dockerd with live-restore, restarted twice.

const MiB = 1024 ** 2;
const storage = await testStorageRoot();
const volume = `agent-test-${testRun}-stuck`;
let quota: StorageQuota;
let dockerd: DedicatedDockerd;
let runtime: DockerRuntime;

const pending = () =>
  db()<{ volume: string; attempts: number; reason: string }[]>`
    select volume, attempts, reason from volume_removals order by volume`;

async function restartEngine() {
  await dockerd.stop();
  await dockerd.start(["--live-restore"]);
}

describeDocker("a volume the engine still counts as mounted (a dedicated dockerd)", () => {
  beforeAll(async () => {
    if ("reason" in storage) throw new Error(storage.reason);
    quota = storage.quota;
    dockerd = await dedicatedDockerd(testRun.slice(-6));
    await dockerd.start(["--live-restore"]);
    runtime = new DockerRuntime({
      host: dockerd.host,
      maxCpus: 1,
      storage: { quota, defaultLimitBytes: 128 * MiB },
    });
    setRuntime(runtime);
  }, 120_000);

  afterAll(async () => {
    setRuntime(undefined);
    await dockerd?.destroy();
    await quota?.remove(volume).catch(() => {});
  }, 60_000);

  it("is deferred, tried again each pass, and removed once the engine has restarted", async () => {
    const image = await buildStandin(dockerd);
    await runtime.ensureVolume(volume, {});
    expect(await quota.has(volume)).toBe(true);
    const container = await runtime.docker.createContainer({
      Image: image,
      HostConfig: {
        NetworkMode: "none",
        Mounts: [{ Type: "volume", Source: volume, Target: "/state" }],
      },
    });
    await container.start();

    await restartEngine();
    expect((await container.inspect()).State.Running).toBe(true); // lived through it
    await container.remove({ force: true });

    // Nothing uses the volume, and the engine still refuses it: the caller goes on.
    expect(await removeVolumeOrDefer(volume)).toBe("deferred");
    expect(await pending()).toEqual([
      { volume, attempts: 1, reason: expect.stringMatching(/volume has active mounts/) },
    ]);
    expect(await runtime.volumeExists(volume)).toBe(true);
    expect(await quota.has(volume)).toBe(true); // the data stays with the engine's volume

    // Reconcile's pass: still refused, still listed.
    expect(await retryVolumeRemovals()).toEqual([]);
    expect((await pending())[0]?.attempts).toBe(2);

    // The engine's next restart clears its count: the pass removes volume and subvolume.
    await restartEngine();
    expect(await retryVolumeRemovals()).toEqual([volume]);
    expect(await pending()).toEqual([]);
    expect(await runtime.volumeExists(volume)).toBe(false);
    expect(await quota.has(volume)).toBe(false);
  }, 180_000);

  it("is deferred while the engine does not answer, and removed once it does", async () => {
    const away = `${volume}-away`;
    await runtime.ensureVolume(away, {});
    // A restore that failed while the engine was away left its fresh volume so (the soak).
    setRuntime(new DockerRuntime({ socketPath: `${dockerd.dir}/gone.sock` }));
    try {
      expect(await removeVolumeOrDefer(away)).toBe("deferred");
      expect(await pending()).toEqual([
        { volume: away, attempts: 1, reason: expect.stringMatching(/unreachable|ENOENT/) },
      ]);
      expect(await retryVolumeRemovals()).toEqual([]);
    } finally {
      setRuntime(runtime);
    }
    expect(await retryVolumeRemovals()).toEqual([away]);
    expect(await pending()).toEqual([]);
    expect(await runtime.volumeExists(away)).toBe(false);
    expect(await quota.has(away)).toBe(false);
  });

  it("never removes a listed volume that an agent names", async () => {
    const userId = `usr_stuck_${testRun}`.replace(/-/g, "_");
    await ensureUser(userId);
    const row = await ensureInstanceRecord(userId);
    await runtime.ensureVolume(row.volume_name, {});
    await db()`insert into volume_removals (volume, reason) values (${row.volume_name}, 'test')`;
    expect(await retryVolumeRemovals()).toEqual([]);
    expect(await pending()).toEqual([]);
    expect(await runtime.volumeExists(row.volume_name)).toBe(true);
    await runtime.removeVolume(row.volume_name);
  });
});
