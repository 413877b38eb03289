import { execFileSync } from "node:child_process";
import { stat } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import {
  gatewayReserveBytes,
  parseQgroups,
  parseSubvolumes,
  type StorageQuota,
} from "../../worker/runtime/storage-quota.ts";
import { describeDocker, ensureSleeperImage, testLabels, testRun } from "./docker-support.ts";
import { testStorageRoot } from "./storage-support.ts";

// A limited volume flattened as an image update's copy did before decision 0227 (`rm -rf` of
// the state, then `cp -a` back: the nested `data/workspace` subvolume became a plain folder in
// the volume's own group), repaired on the real btrfs root (decision 0235): a subvolume in the
// agent's group again, its files, owners and modes as they were, the agent's limit biting in a
// container on the Docker volume, a second repair doing nothing. No gateway: one one-shot.

const MiB = 1024 ** 2;
const LIMIT = 128 * MiB; // 64 MiB reserve, 64 MiB for the agent
const storage = await testStorageRoot();
const volume = `agent-test-${testRun}-flat`;
let quota: StorageQuota;
let rt: DockerRuntime;

const sh = (script: string) => execFileSync("sh", ["-c", script], { encoding: "utf8" });
const btrfs = (...args: string[]) => execFileSync("btrfs", args, { encoding: "utf8" });

/** Every entry below `folder`: path, owner, mode, type, size, link target, mtime; and hashes. */
const manifest = (folder: string) =>
  sh(`cd ${folder} && find . -printf '%P|%u:%g|%m|%y|%s|%l|%T@\\n' | sort &&
    find . -type f -exec sha256sum {} + | sort`);

function groupsOf() {
  const id = parseSubvolumes(btrfs("subvolume", "list", "-o", quota.root)).get(volume);
  return {
    id,
    groups: parseQgroups(btrfs("qgroup", "show", "--raw", "-re", "--sync", quota.root)),
  };
}

describeDocker("a flattened limited volume repaired (real btrfs)", () => {
  let folders: { subvolume: string; data: string; tmp: string };
  let workspace: string;
  let before: { workspace: string; tmp: string };

  beforeAll(async () => {
    if ("reason" in storage) throw new Error(storage.reason);
    quota = storage.quota;
    rt = new DockerRuntime({ maxCpus: 1, storage: { quota, defaultLimitBytes: LIMIT } });
    await rt.ensureVolume(volume, testLabels(), {
      limits: { memoryBytes: 0, cpuShares: 0, cpus: 1, pidsLimit: 0 },
      storageLimitBytes: LIMIT,
    });
    folders = quota.folders(volume);
    workspace = path.join(folders.data, "workspace");
    // The agent's files as the gateway's user writes them: folders, modes, a link, a blob.
    sh(`cd ${workspace} && mkdir -p sub/deep .git && echo mine > notes.md && chmod 600 notes.md &&
      echo deep > sub/deep/f && ln -s notes.md link && echo ref > .git/HEAD &&
      head -c ${16 * MiB} /dev/urandom > sub/blob && chown -R -h 1000:1000 . &&
      echo t > ${folders.tmp}/left && sync`);
    before = { workspace: manifest(workspace), tmp: manifest(folders.tmp) };
  }, 120_000);

  afterAll(async () => {
    await rt?.removeVolume(volume).catch(() => {});
  });

  it("is flattened as the old copy left it: plain folders, the files outside the agent's group", () => {
    // update-image.ts before 0227, both ways: the state into the snapshot and back.
    const { subvolume, data, tmp } = folders;
    sh(`set -e; mkdir ${subvolume}/snap; cp -a ${data}/. ${subvolume}/snap/;
      rm -rf ${data}/*; cp -a ${subvolume}/snap/. ${data}/; rm -rf ${subvolume}/snap`);
    // And /tmp likewise (no copy did that; the repair takes either).
    sh(`set -e; cp -a ${tmp} ${subvolume}/tmp.plain; btrfs subvolume delete ${tmp} >/dev/null;
      mv ${subvolume}/tmp.plain ${tmp}`);
    expect(sh(`stat -c %i ${workspace} ${tmp}`).split("\n").slice(0, 2)).not.toContain("256");
    const { id, groups } = groupsOf();
    expect(groups.get(`1/${id}`)!.usedBytes).toBeLessThan(MiB); // the blob is in 0/<id> only
    expect(groups.get(`0/${id}`)!.usedBytes).toBeGreaterThan(16 * MiB);
  });

  it("makes them subvolumes in the agent's group again, files and owners kept", async () => {
    const started = performance.now();
    expect(await rt.repairVolumeLayout(volume)).toEqual(["data/workspace", "tmp"]);
    process.stdout.write(
      `repair (16 MiB workspace): ${Math.round(performance.now() - started)} ms\n`,
    );

    expect((await stat(workspace)).ino).toBe(256);
    expect((await stat(folders.tmp)).ino).toBe(256);
    expect(btrfs("subvolume", "show", workspace)).toMatch(/Subvolume ID:\s+\d+/);
    expect(manifest(workspace)).toBe(before.workspace);
    expect(manifest(folders.tmp)).toBe(before.tmp);
    // No work folder left; the volume's own folder holds what it held.
    expect(sh(`ls -A ${folders.subvolume}`).split("\n").filter(Boolean).sort()).toEqual([
      "data",
      "tmp",
    ]);

    const { id, groups } = groupsOf();
    expect(groups.get(`1/${id}`)!.usedBytes).toBeGreaterThan(16 * MiB);
    expect(groups.get(`0/${id}`)!.usedBytes).toBeLessThan(MiB);
    expect(groups.get(`2/${id}`)?.limitBytes).toBe(LIMIT);
    expect(groups.get(`1/${id}`)?.limitBytes).toBe(LIMIT - gatewayReserveBytes(LIMIT));
    // Counted at once: btrfs did not have to rescan (no warning from `qgroup show`).
    const shown = execFileSync("btrfs", ["qgroup", "show", quota.root], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    expect(shown).not.toMatch(/inconsistent|rescan/);
    expect(sh(`btrfs quota rescan -s ${quota.root}`)).toMatch(/no rescan operation in progress/);
  }, 60_000);

  it("holds the agent's files to the agent's part again, in a container on the Docker volume", async () => {
    const over = await rt.runOnce({
      image: ensureSleeperImage(),
      volume,
      volumeTarget: "/state",
      user: "1000",
      entrypoint: ["sh", "-c"],
      cmd: [
        "cat /state/workspace/notes.md; dd if=/dev/zero of=/state/workspace/fill bs=1M count=96 2>&1; rm -f /state/workspace/fill",
      ],
      labels: testLabels(),
    });
    expect(over.stdout).toMatch(/^mine\n/);
    expect(over.stdout).toMatch(/Disk quota exceeded/); // 16 MiB there, 64 MiB the agent's part
  }, 120_000);

  it("does nothing the second time", async () => {
    const id = btrfs("inspect-internal", "rootid", workspace).trim();
    const was = manifest(workspace); // the one-shot's write changed the folder's mtime
    expect(await rt.repairVolumeLayout(volume)).toEqual([]);
    expect(btrfs("inspect-internal", "rootid", workspace).trim()).toBe(id);
    expect(manifest(workspace)).toBe(was);
  });
});
