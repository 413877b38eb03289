import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { StorageQuota } from "../../worker/runtime/storage-quota.ts";
import { describeDocker, GATEWAY_IMAGE, testRun } from "./docker-support.ts";
import { testStorageRoot } from "./storage-support.ts";

// A gateway's processes cannot make a btrfs subvolume or snapshot on its limited volume (decision
// 0244): one made there would be in a qgroup of its own, outside the agent's limit. The guard is
// the gateway image's own binary (its ENTRYPOINT's first word), run here on the host as the
// gateway's user against a limited volume on the real btrfs root, with the host's btrfs-progs
// making the ioctls. Without the guard the same user makes one: the hole the guard closes.

const MiB = 1024 ** 2;
const storage = await testStorageRoot();
const volume = `agent-test-${testRun}-guard`;
const GUARD = "/usr/local/bin/agent-gateway-fs-guard";
let quota: StorageQuota;
let guard: string;
let folder: string;
let workspace: string;

/** As the gateway's user (uid 1000), through the guard unless told not to. */
function asGateway(command: string[], guarded = true) {
  const argv = ["--reuid=1000", "--regid=1000", "--clear-groups"];
  const run = spawnSync("setpriv", [...argv, ...(guarded ? [guard] : []), ...command], {
    encoding: "utf8",
  });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describeDocker("the gateway's subvolume guard (real btrfs)", () => {
  beforeAll(async () => {
    if ("reason" in storage) throw new Error(storage.reason);
    quota = storage.quota;
    await quota.ensure(volume, 128 * MiB);
    workspace = path.join(quota.folders(volume).data, "workspace");
    folder = mkdtempSync(path.join(tmpdir(), "fs-guard-"));
    guard = path.join(folder, "fs-guard");
    const made = execFileSync("docker", ["create", GATEWAY_IMAGE], { encoding: "utf8" }).trim();
    try {
      execFileSync("docker", ["cp", `${made}:${GUARD}`, guard]);
    } finally {
      execFileSync("docker", ["rm", made]);
    }
  });

  afterAll(async () => {
    if (folder) rmSync(folder, { recursive: true, force: true });
    await quota?.remove(volume);
  });

  it("is the image's entrypoint, ahead of the gateway's own", () => {
    const entrypoint = execFileSync(
      "docker",
      ["image", "inspect", "--format", "{{json .Config.Entrypoint}}", GATEWAY_IMAGE],
      { encoding: "utf8" },
    );
    expect(JSON.parse(entrypoint)).toEqual([GUARD, "/usr/local/bin/agent-gateway-entrypoint"]);
  });

  it("refuses a subvolume and a snapshot in the agent's workspace, and lets files be written", () => {
    const made = asGateway(["btrfs", "subvolume", "create", path.join(workspace, "own")]);
    expect(made.status).not.toBe(0);
    expect(made.output).toMatch(/Operation not permitted/);
    const snap = asGateway(["btrfs", "subvolume", "snapshot", workspace, `${workspace}/snap`]);
    expect(snap.status).not.toBe(0);
    expect(snap.output).toMatch(/Operation not permitted/);

    const wrote = asGateway([
      "sh",
      "-c",
      `echo kept > ${workspace}/notes.md && cat ${workspace}/notes.md`,
    ]);
    expect(wrote).toEqual({ status: 0, output: "kept\n" });

    // The same user without the guard: btrfs lets it make one (removed again, as root).
    const open = asGateway(["btrfs", "subvolume", "create", path.join(workspace, "own")], false);
    expect(open.status).toBe(0);
    execFileSync("btrfs", ["subvolume", "delete", path.join(workspace, "own")]);
  });
});
