import { describe, expect, it } from "vitest";
import {
  parseQgroups,
  parseSubvolumes,
  type Run,
  StorageQuota,
} from "../../worker/runtime/storage-quota.ts";

// The btrfs qgroup limiter's commands and parsing (decision 0216), against recorded output of
// btrfs-progs 6.2; the real filesystem is exercised by test/agents/storage-limits-real.test.ts.

const QGROUPS = `Qgroupid    Referenced    Exclusive  Max referenced  Max exclusive   Path
--------    ----------    ---------  --------------  -------------   ----
0/5              16384        16384            none           none   <toplevel>
0/256         73383936     73383936       209715200           none   vol-a
0/257            16384        16384            none           none   vol-b
`;
const SUBVOLUMES = `ID 256 gen 24 top level 5 path vol-a
ID 257 gen 24 top level 5 path vol-b
`;

function recorder(outputs: Record<string, string> = {}) {
  const calls: string[][] = [];
  const run: Run = async (file, args) => {
    calls.push([file, ...args]);
    const key = `${file} ${args.slice(0, 2).join(" ")}`;
    if (key in outputs) return outputs[key] ?? "";
    return "";
  };
  return { calls, run };
}

describe("storage quota", () => {
  it("parses qgroups and subvolumes", () => {
    expect(parseQgroups(QGROUPS).get("0/256")).toEqual({
      usedBytes: 73383936,
      limitBytes: 209715200,
    });
    expect(parseQgroups(QGROUPS).get("0/257")).toEqual({ usedBytes: 16384, limitBytes: undefined });
    expect(parseSubvolumes(SUBVOLUMES)).toEqual(
      new Map([
        ["vol-a", "256"],
        ["vol-b", "257"],
      ]),
    );
  });

  it("reports usage per volume by its subvolume's qgroup", async () => {
    const { run } = recorder({
      "btrfs subvolume list": SUBVOLUMES,
      "btrfs qgroup show": QGROUPS,
    });
    const usage = await new StorageQuota("/srv/storage", run).usage();
    expect(usage.get("vol-a")).toEqual({ usedBytes: 73383936, limitBytes: 209715200 });
    expect(usage.has("<toplevel>")).toBe(false);
  });

  it("sets a limit by qgroup id on the root, so a full volume can still be raised", async () => {
    const { calls, run } = recorder({ "btrfs subvolume list": SUBVOLUMES });
    await new StorageQuota("/srv/storage", run).setLimit("vol-a", 5 * 1024 ** 3);
    expect(calls.at(-1)).toEqual([
      "btrfs",
      "qgroup",
      "limit",
      String(5 * 1024 ** 3),
      "0/256",
      "/srv/storage",
    ]);
    await expect(new StorageQuota("/srv/storage", run).setLimit("nope", 1)).rejects.toThrow(
      /no limited volume/,
    );
  });

  it("refuses a name that is not a volume name (no path escapes the root)", () => {
    expect(() => new StorageQuota("/srv/storage").folders("../etc")).toThrow(/not a volume name/);
  });

  it("says why a root cannot limit: unset, not btrfs, quotas off", async () => {
    expect(await StorageQuota.probe(undefined)).toEqual({
      reason: expect.stringMatching(/STORAGE_ROOT is not set/),
    });
    const ext4 = recorder({ "stat -f -c": "ext2/ext3\n" });
    expect(await StorageQuota.probe("/srv/storage", ext4.run)).toEqual({
      reason: "/srv/storage is ext2/ext3, not the prepared btrfs",
    });
    const off: Run = async (file) => {
      if (file === "stat") return "btrfs\n";
      throw Object.assign(new Error("failed"), {
        stderr: "ERROR: can't list qgroups: quotas not enabled\n",
      });
    };
    expect(await StorageQuota.probe("/srv/storage", off)).toEqual({
      reason: "/srv/storage cannot limit volumes: ERROR: can't list qgroups: quotas not enabled",
    });
    const ok = recorder({ "stat -f -c": "btrfs\n" });
    expect(await StorageQuota.probe("/srv/storage", ok.run)).toHaveProperty("quota");
  });
});
