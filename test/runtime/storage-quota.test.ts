import { describe, expect, it } from "vitest";
import type { DockerRuntime } from "../../worker/runtime/docker.ts";
import {
  gatewayReserveBytes,
  parseQgroups,
  parseSubvolumes,
  type Run,
  StorageQuota,
} from "../../worker/runtime/storage-quota.ts";
import { SwarmStorage, summarizeNodes } from "../../worker/runtime/swarm-storage.ts";
import type { StorageEnforcement } from "../../worker/runtime/types.ts";

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

// A volume made with the agent's own group (decision 0224): vol-a's workspace (0/258) and tmp
// (0/259) in 1/256, limited to 48 MiB; 0/256 and 1/256 in 2/256, limited to 64 MiB.
const NESTED_QGROUPS = `Qgroupid    Referenced    Exclusive  Max referenced  Max exclusive   Path
--------    ----------    ---------  --------------  -------------   ----
0/256         16777216     16777216            none           none   vol-a
0/257            16384        16384            none           none   vol-b
0/258         50298880     50298880            none           none   vol-a/data/workspace
0/259            16384        16384            none           none   vol-a/tmp
1/256         50315264     50315264        50331648           none   2/256<1 member qgroup >
2/256         67092480     67092480        67108864           none   <0 member qgroups>
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

  it("keeps a reserve for the gateway's state: 5 %, 64 MiB to 1 GiB, at most half", () => {
    const MiB = 1024 ** 2;
    expect(gatewayReserveBytes(256 * MiB)).toBe(64 * MiB);
    expect(gatewayReserveBytes(5 * 1024 * MiB)).toBe(256 * MiB);
    expect(gatewayReserveBytes(55 * 1024 * MiB)).toBe(1024 * MiB);
    expect(gatewayReserveBytes(100 * MiB)).toBe(50 * MiB);
  });

  it("limits the volume's group and the agent's group less the reserve, raising whole first", async () => {
    const MiB = 1024 ** 2;
    const { calls, run } = recorder({
      "btrfs subvolume list": SUBVOLUMES,
      "btrfs qgroup show": NESTED_QGROUPS,
    });
    const quota = new StorageQuota("/srv/storage", run);
    await quota.setLimit("vol-a", 256 * MiB);
    const limits = () =>
      calls.filter((c) => c[2] === "limit").map((c) => `${c[4]}=${Number(c[3]) / MiB}`);
    expect(limits()).toEqual(["2/256=256", "1/256=192"]);
    calls.length = 0;
    await quota.setLimit("vol-a", 48 * MiB); // lowering: the agent's group first
    expect(limits()).toEqual(["1/256=24", "2/256=48"]);
  });

  it("reports a nested volume's usage with the gateway's unused reserve counted as used", async () => {
    const { run } = recorder({
      "btrfs subvolume list": SUBVOLUMES,
      "btrfs qgroup show": NESTED_QGROUPS,
    });
    const usage = await new StorageQuota("/srv/storage", run).usage();
    // The agent's group is full (47.98 of 48 MiB): with the 16 MiB reserve, the volume is full.
    expect(usage.get("vol-a")).toEqual({
      usedBytes: 50315264 + 16 * 1024 ** 2,
      limitBytes: 67108864,
    });
    expect(usage.get("vol-b")).toEqual({ usedBytes: 16384, limitBytes: undefined });
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

  it("makes a volume's layout through its runner alone: a Swarm node's host is another machine", async () => {
    const missing: Run = async (file, args) => {
      calls.push([file, ...args]);
      if (file === "stat") throw Object.assign(new Error("no such file"), { stderr: "" });
      if (file === "btrfs" && args[1] === "list") {
        return args[2] === "-o" && args[3] === "/srv/storage"
          ? SUBVOLUMES
          : "ID 258 gen 24 top level 256 path vol-a/data/workspace\nID 259 gen 24 top level 256 path vol-a/tmp\n";
      }
      return "";
    };
    const calls: string[][] = [];
    await new StorageQuota("/srv/storage", missing).ensure("vol-a", 256 * 1024 ** 2);
    const made = calls.map((c) => c.join(" "));
    expect(made).toEqual(
      expect.arrayContaining([
        "btrfs subvolume create /srv/storage/vol-a",
        "mkdir -p -m 700 /srv/storage/vol-a/data",
        "chown 1000:1000 /srv/storage/vol-a/data",
        "btrfs subvolume create /srv/storage/vol-a/data/workspace",
        "chown 1000:1000 /srv/storage/vol-a/data/workspace",
        "btrfs subvolume create /srv/storage/vol-a/tmp",
        "btrfs qgroup assign 0/258 1/256 /srv/storage",
        "chmod 1777 /srv/storage/vol-a/tmp",
      ]),
    );
    expect(await new StorageQuota("/srv/storage", missing).has("vol-a")).toBe(false);
  });

  it("says per Swarm node whether limits hold: enforced only when every node does", () => {
    const on = { enforced: true as const, mechanism: "btrfs qgroups on /srv/storage" };
    expect(summarizeNodes([])).toMatchObject({ enforced: false });
    expect(
      summarizeNodes([
        { node: "n1", ...on },
        { node: "n2", ...on },
      ]),
    ).toEqual({
      enforced: true,
      mechanism: "btrfs qgroups on /srv/storage on every node (n1, n2)",
    });
    expect(
      summarizeNodes([
        { node: "n1", ...on },
        {
          node: "n2",
          enforced: false,
          reason: "/srv/storage is ext2/ext3, not the prepared btrfs",
        },
      ]),
    ).toEqual({
      enforced: false,
      reason: "node n2: /srv/storage is ext2/ext3, not the prepared btrfs; enforced on n1",
    });
  });

  it("probes a Swarm node's host through its storage agent and tells each answer", async () => {
    const execs: string[][] = [];
    let given: StorageEnforcement = { enforced: false, reason: "not yet" };
    // A node engine whose storage agent runs: every command is an exec through the host's shell.
    const engine = {
      inspect: async () => ({ id: "agent", running: true, image: "gw:1" }),
      exec: async (_id: string, cmd: string[]) => {
        execs.push(cmd);
        return { exitCode: 0, stdout: cmd.includes("stat") ? "btrfs\n" : "", stderr: "" };
      },
      configureStorage: (storage: { quota?: StorageQuota; reason?: string }) => {
        given = storage.quota
          ? { enforced: true, mechanism: `btrfs qgroups on ${storage.quota.root}` }
          : { enforced: false, reason: storage.reason ?? "" };
      },
      storageEnforcement: () => given,
    } as unknown as DockerRuntime;
    const told: StorageEnforcement[] = [];
    const storage = new SwarmStorage({
      root: "/srv/storage",
      image: "gw:1",
      defaultLimitBytes: 1024 ** 3,
      onProbe: (state) => told.push(state),
    });
    await storage.configure("node-b", "b", engine);
    expect(execs[0]).toEqual([
      "chroot",
      "/host",
      "/bin/sh",
      "-c",
      'exec "$0" "$@"',
      "stat",
      "-f",
      "-c",
      "%T",
      "/srv/storage",
    ]);
    expect(told).toEqual([
      { enforced: true, mechanism: "btrfs qgroups on /srv/storage on every node (b)" },
    ]);
  });
});
