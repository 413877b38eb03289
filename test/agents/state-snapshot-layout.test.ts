import { execFileSync } from "node:child_process";
import { stat } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  ensureInstanceRecord,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { volumeLabels } from "../../worker/instances/engine.ts";
import { snapshotVolume } from "../../worker/instances/update-image.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { limitsForPlan, setRuntime } from "../../worker/runtime/index.ts";
import {
  gatewayReserveBytes,
  parseQgroups,
  parseSubvolumes,
  type StorageQuota,
} from "../../worker/runtime/storage-quota.ts";
import { ensureUser } from "../helpers/users.ts";
import {
  cleanupTestObjects,
  describeDocker,
  ensureSleeperImage,
  testLabels,
  testRun,
} from "../runtime/docker-support.ts";
import { testStorageRoot } from "../runtime/storage-support.ts";

// An image update snapshots the state into `<volume>-prev` and a rollback copies it back
// (worker/instances/update-image.ts). On a limited volume the agent's workspace is a nested
// subvolume in the agent's own qgroup (decision 0224); the copy must keep it, on both volumes,
// with the limits (decision 0227). No gateway: the copy is a one-shot on the gateway's image.

const MiB = 1024 ** 2;
const LIMIT = 128 * MiB; // STORAGE_BASE_GB=0.125: 64 MiB reserve, 64 MiB for the agent
const USER = `usr_snapshot_${testRun}`;
const storage = await testStorageRoot();
let quota: StorageQuota;
let rt: DockerRuntime;
let row: InstanceRow;
let image: string;

const inVolume = (volume: string, script: string) =>
  rt.runOnce({
    image,
    volume,
    volumeTarget: "/state",
    user: "1000",
    entrypoint: ["sh", "-c"],
    cmd: [script],
    labels: testLabels(),
  });

/** The workspace is a subvolume in the agent's group, and both groups carry their limits. */
async function expectLimitedLayout(volume: string) {
  const workspace = path.join(quota.folders(volume).data, "workspace");
  expect((await stat(workspace)).ino, `${volume}: workspace is a subvolume`).toBe(256);
  const id = parseSubvolumes(
    execFileSync("btrfs", ["subvolume", "list", "-o", quota.root], { encoding: "utf8" }),
  ).get(volume);
  const groups = parseQgroups(
    execFileSync("btrfs", ["qgroup", "show", "--raw", "-re", "--sync", quota.root], {
      encoding: "utf8",
    }),
  );
  expect(groups.get(`2/${id}`)?.limitBytes).toBe(LIMIT);
  expect(groups.get(`1/${id}`)?.limitBytes).toBe(LIMIT - gatewayReserveBytes(LIMIT));
  // In the agent's group: its files stop at the agent's part, below the volume's limit. With
  // inconsistent counts btrfs holds no limit at all (decision 0243): named, not a bare miss.
  expect(await quota.consistent(), "the storage root's qgroup counts are consistent").toBe(true);
  const over = await inVolume(
    volume,
    "dd if=/dev/zero of=/state/workspace/fill bs=1M count=96 2>&1; rm -f /state/workspace/fill",
  );
  expect(over.stdout).toMatch(/Disk quota exceeded/);
}

describeDocker("an image update's state snapshot on a limited volume", () => {
  beforeAll(async () => {
    if ("reason" in storage) throw new Error(storage.reason);
    quota = storage.quota;
    rt = new DockerRuntime({ maxCpus: 1, storage: { quota, defaultLimitBytes: LIMIT } });
    process.env.RUNTIME_DEPLOYMENT = testRun;
    process.env.STORAGE_BASE_GB = "0.125";
    resetEnvCache();
    setRuntime(rt);
    image = ensureSleeperImage();
    await ensureUser(USER);
    row = await ensureInstanceRecord(USER, { plan: "solo" });
    await rt.ensureVolume(row.volume_name, volumeLabels(row), {
      limits: limitsForPlan(row.plan),
      storageLimitBytes: LIMIT,
    });
  }, 120_000);

  afterAll(async () => {
    setRuntime(undefined);
    await cleanupTestObjects(rt);
    for (const volume of [row?.volume_name, `${row?.volume_name}-prev`]) {
      if (volume && quota) await quota.remove(volume).catch(() => {});
    }
    delete process.env.STORAGE_BASE_GB;
    resetEnvCache();
  });

  it("keeps the nested subvolumes and their limits after the snapshot and after a rollback", async () => {
    const wrote = await inVolume(
      row.volume_name,
      "set -e; mkdir /state/agents; echo v1 > /state/agents/a.json; echo mine > /state/workspace/notes.md; mkdir /state/workspace/sub; echo deep > /state/workspace/sub/f",
    );
    expect(wrote.stderr).toBe("");

    await snapshotVolume(row, image, "save");
    await expectLimitedLayout(row.volume_name);
    await expectLimitedLayout(`${row.volume_name}-prev`);

    // The update changed the state; the rollback brings the snapshot back, files and layout.
    const changed = await inVolume(
      row.volume_name,
      "set -e; echo v2 > /state/agents/a.json; rm -r /state/workspace/sub; echo new > /state/workspace/new.md",
    );
    expect(changed.exitCode).toBe(0);
    await snapshotVolume(row, image, "restore");
    const back = await inVolume(
      row.volume_name,
      "cat /state/agents/a.json /state/workspace/notes.md /state/workspace/sub/f; ls /state/workspace; stat -c %u /state/workspace/notes.md",
    );
    expect(back.stdout).toBe("v1\nmine\ndeep\nnotes.md\nsub\n1000\n");
    await expectLimitedLayout(row.volume_name);
  }, 300_000);

  it("keeps them when a backup's state goes into a fresh volume (a restore)", async () => {
    const fresh = `${row.volume_name}-restored`;
    try {
      await rt.ensureVolume(fresh, volumeLabels(row), {
        limits: limitsForPlan(row.plan),
        storageLimitBytes: LIMIT,
      });
      // As restore.ts does: the archive's state/ entries written into the new volume.
      await rt.importVolume(fresh, image, await rt.exportVolume(row.volume_name, image));
      const back = await inVolume(fresh, "cat /state/workspace/notes.md /state/workspace/sub/f");
      expect(back.stdout).toBe("mine\ndeep\n");
      await expectLimitedLayout(fresh);
    } finally {
      await rt.removeVolume(fresh);
    }
  }, 300_000);
});
