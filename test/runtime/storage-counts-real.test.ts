import { execFileSync } from "node:child_process";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sampleStorage } from "../../worker/instances/storage-limits.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import type { StorageQuota } from "../../worker/runtime/storage-quota.ts";
import { testRun } from "./docker-support.ts";
import { ownStorageRoot } from "./storage-support.ts";

// Inconsistent qgroup counts on the real btrfs (decision 0243): btrfs then enforces no limit at
// all (a CI run's reused root let a 96 MiB write through a 64 MiB limit). The storage pass finds
// that state and rescans, after which the agent's limit bites again. On a root of the test's
// own: the inconsistency is filesystem-wide, and the other storage tests share theirs. No Docker:
// the volume is written from the host, as root (root is held to qgroup limits too).

const MiB = 1024 ** 2;
const LIMIT = 128 * MiB; // 64 MiB reserve, 64 MiB for the agent
const storage = await ownStorageRoot("counts");
const volume = `agent-test-${testRun}-counts`;
const shared = `shared-${testRun}`;
let quota: StorageQuota;

const sh = (script: string) => execFileSync("sh", ["-c", script], { encoding: "utf8" });

/** 96 MiB into the agent's workspace: what dd says (the limit's refusal, or the copy). */
function fill(): string {
  const file = path.join(quota.folders(volume).data, "workspace", "fill");
  try {
    return sh(`dd if=/dev/zero of=${file} bs=1M count=96 2>&1; rm -f ${file}`);
  } finally {
    sh(`rm -f ${file}; sync`);
  }
}

describe("inconsistent storage counts (real btrfs)", () => {
  beforeAll(async () => {
    if ("reason" in storage) throw new Error(storage.reason);
    quota = storage.quota;
    setRuntime(new DockerRuntime({ maxCpus: 1, storage: { quota, defaultLimitBytes: LIMIT } }));
    await quota.ensure(volume, LIMIT);
  });

  afterAll(async () => {
    setRuntime(undefined);
    if (!quota) return;
    await quota.remove(volume).catch(() => {});
    sh(`cd ${quota.root} && for s in ${shared}-snap ${shared}; do
      [ -d $s ] && btrfs -q subvolume delete $s; done; true`);
    await quota.restoreCounts();
  });

  it("are rescanned by the storage pass, and the agent's limit holds again", async () => {
    expect(await quota.consistent()).toBe(true);
    expect(fill()).toMatch(/Disk quota exceeded/);

    // A group taking a subvolume whose data is shared (a snapshot's): btrfs cannot count it at
    // once and, told not to rescan, marks the whole filesystem's counts inconsistent.
    sh(`cd ${quota.root} && btrfs -q subvolume create ${shared} &&
      head -c ${8 * MiB} /dev/urandom > ${shared}/blob && btrfs -q subvolume snapshot ${shared} ${shared}-snap &&
      sync && id=$(btrfs inspect-internal rootid ${shared}-snap) &&
      btrfs qgroup create 1/$id . && btrfs qgroup assign --no-rescan 0/$id 1/$id .`);
    expect(await quota.consistent()).toBe(false);

    await sampleStorage();
    expect(await quota.consistent()).toBe(true);
    expect(fill()).toMatch(/Disk quota exceeded/);
    expect(await quota.restoreCounts()).toBe(false); // nothing left to do
  });
});
