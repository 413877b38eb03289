import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { cleanOrphans, mountsBelow, removeTree, SWARM_PREFIX } from "./swarm-leftovers.ts";

// The test swarm's clean-up (swarm-leftovers.ts). A stopped node dockerd once left bind mounts
// of its overlay networks' namespaces below the run folder: the removal failed with EBUSY and
// the node folders on tmpfs (3 GB) stayed, filling the swap the next run's freezes needed.

const mount = (...args: string[]) => execFileSync("mount", args, { stdio: "pipe" });

describe("test swarm leftovers", () => {
  it("lists the mounts at or below a folder, deepest first, with mountinfo's escapes read", () => {
    const info = [
      "36 25 0:4 net:[4026532] /tmp/aps1234/n1/exec/netns/lb_ywv2 rw shared:1 - nsfs nsfs rw",
      "37 25 0:4 net:[4026533] /tmp/aps1234/n1/exec/netns/1-ywv2 rw shared:1 - nsfs nsfs rw",
      "38 25 0:4 / /tmp/aps1234 rw - tmpfs tmpfs rw",
      "39 25 0:4 / /tmp/aps12345/x rw - tmpfs tmpfs rw",
      "40 25 0:4 / /tmp/aps1234/with\\040space rw - tmpfs tmpfs rw",
    ].join("\n");
    expect(mountsBelow("/tmp/aps1234", info)).toEqual([
      "/tmp/aps1234/n1/exec/netns/lb_ywv2",
      "/tmp/aps1234/n1/exec/netns/1-ywv2",
      "/tmp/aps1234/with space",
      "/tmp/aps1234",
    ]);
  });

  it("removes a folder something is still mounted in, where a plain removal fails", () => {
    const dir = `/tmp/${SWARM_PREFIX}-leftovers-test`;
    mkdirSync(`${dir}/n1/exec/netns/lb_x`, { recursive: true });
    mount("-t", "tmpfs", "tmpfs", `${dir}/n1/exec/netns/lb_x`);
    try {
      expect(() => rmSync(dir, { recursive: true, force: true })).toThrow(/resource busy/);
      removeTree(dir);
      expect(existsSync(dir)).toBe(false);
      expect(mountsBelow(dir)).toEqual([]);
    } finally {
      if (existsSync(dir)) removeTree(dir);
    }
  });

  it("removes the run and node folders of a checkout that no longer exists, and keeps others'", async () => {
    const orphan = "aps0f0f";
    const kept = "aps0e0e";
    expect([orphan, kept]).not.toContain(SWARM_PREFIX);
    for (const [prefix, owner] of [
      [orphan, "/tmp/a-checkout-that-was-removed"],
      [kept, process.cwd()],
    ] as const) {
      mkdirSync(`/tmp/${prefix}/n1/exec`, { recursive: true });
      writeFileSync(`/tmp/${prefix}/checkout`, owner);
      mkdirSync(`/dev/shm/${prefix}-swarm-nodes/n1/data`, { recursive: true });
    }
    mount("-t", "tmpfs", "tmpfs", `/tmp/${orphan}/n1/exec`);
    try {
      expect(await cleanOrphans()).toBeGreaterThanOrEqual(1);
      expect(existsSync(`/tmp/${orphan}`)).toBe(false);
      expect(existsSync(`/dev/shm/${orphan}-swarm-nodes`)).toBe(false);
      expect(existsSync(`/tmp/${kept}/checkout`)).toBe(true);
      expect(existsSync(`/dev/shm/${kept}-swarm-nodes/n1/data`)).toBe(true);
    } finally {
      for (const prefix of [orphan, kept]) {
        removeTree(`/tmp/${prefix}`);
        removeTree(`/dev/shm/${prefix}-swarm-nodes`);
      }
    }
  });
});
