import { afterEach, describe, expect, it } from "vitest";
import { repairBeforeStart } from "../../worker/instances/container.ts";
import { type AgentRuntime, type ContainerInfo, setRuntime } from "../../worker/runtime/index.ts";
import { type Run, StorageQuota } from "../../worker/runtime/storage-quota.ts";

// The repair of a volume whose agent subvolumes an update's copy flattened (decision 0235): its
// commands against recorded btrfs-progs 6.2 output, and where it runs (before a start, only
// while no gateway writes). The real filesystem: test/agents/storage-layout-real.test.ts.

const MiB = 1024 ** 2;
const ROOT = "/srv/storage";
const VOL = `${ROOT}/vol-a`;
const SUBVOLUMES = "ID 256 gen 24 top level 5 path vol-a\nID 257 gen 24 top level 5 path vol-b\n";
// vol-a with the agent's own group (decision 0224): 1/256 in 2/256, the volume at 64 MiB.
const QGROUPS = `Qgroupid    Referenced    Exclusive  Max referenced  Max exclusive   Path
--------    ----------    ---------  --------------  -------------   ----
0/256         16777216     16777216            none           none   vol-a
0/259            16384        16384            none           none   vol-a/tmp
1/256            32768        32768        33554432           none   2/256<1 member qgroup >
2/256         16809984     16809984        67108864           none   <0 member qgroups>
`;
const FOUND_WHOLE = `${VOL}/tmp\n${VOL}/data/workspace\n`;
const FLATTENED = `${VOL}/tmp\n`; // data/workspace a plain folder: no inode 256 there

type Answer = string | Error | ((call: string) => string);

/** A host whose commands answer by the first pattern matching the command line. */
function host(answers: Array<[RegExp, Answer]>) {
  const calls: string[] = [];
  const run: Run = async (file, args) => {
    const line = [file, ...args].join(" ");
    calls.push(line);
    const answer = answers.find(([pattern]) => pattern.test(line))?.[1] ?? "";
    if (answer instanceof Error) throw answer;
    return typeof answer === "function" ? answer(line) : answer;
  };
  return { calls, run };
}

const missing = (what: string) =>
  Object.assign(new Error(`${what}: No such file or directory`), {
    stderr: `find: '${what}': No such file or directory\n`,
  });
const FIND = `find ${VOL} -mindepth 1 -maxdepth 2 -xdev ( -inum 256 -o -name .repair-* ) -print`;
const LISTED: Array<[RegExp, Answer]> = [
  [/^btrfs subvolume list -o \/srv\/storage$/, SUBVOLUMES],
  [/^btrfs qgroup show/, QGROUPS],
  [/^btrfs inspect-internal rootid/, "260\n"],
];

describe("repairing a flattened volume's layout", () => {
  it("runs one find and nothing else when the layout is whole", async () => {
    const { calls, run } = host([[/^find/, FOUND_WHOLE]]);
    expect(await new StorageQuota(ROOT, run).repairLayout("vol-a")).toEqual([]);
    expect(calls).toEqual([FIND]);
  });

  it("makes a new subvolume, assigns it empty, reflinks the files in and swaps", async () => {
    const { calls, run } = host([
      [/^find/, FLATTENED],
      [/^stat -c %F .*data\/workspace$/, "directory\n"],
      ...LISTED,
    ]);
    expect(await new StorageQuota(ROOT, run).repairLayout("vol-a")).toEqual(["data/workspace"]);
    expect(calls).toEqual([
      FIND,
      "btrfs subvolume list -o /srv/storage",
      "btrfs qgroup show --raw -re /srv/storage", // no --sync: only the groups and limits
      "btrfs qgroup limit none 1/256 /srv/storage",
      `stat -c %F ${VOL}/data/workspace`,
      `btrfs subvolume create ${VOL}/.repair-new-workspace`,
      `btrfs inspect-internal rootid ${VOL}/.repair-new-workspace`,
      "btrfs qgroup assign 0/260 1/256 /srv/storage", // empty: no rescan
      `cp -a --reflink=always ${VOL}/data/workspace/. ${VOL}/.repair-new-workspace/`,
      `mv -T ${VOL}/data/workspace ${VOL}/.repair-old-workspace`,
      `mv -T ${VOL}/.repair-new-workspace ${VOL}/data/workspace`,
      // The agent's part of the 64 MiB again (the limit less the 32 MiB reserve), before the
      // plain folder goes: stopped in between, the folder left makes the next start repair.
      `btrfs qgroup limit ${32 * MiB} 1/256 /srv/storage`,
      `rm -rf ${VOL}/.repair-old-workspace`,
    ]);
  });

  it("waits for the rescan btrfs-progs schedules when an assign made the counts inconsistent", async () => {
    const { calls, run } = host([
      [/^find/, FLATTENED],
      [/^stat -c %F/, "directory\n"],
      [/^btrfs qgroup assign/, "Quota data changed, rescan scheduled\n"],
      ...LISTED,
    ]);
    await new StorageQuota(ROOT, run).repairLayout("vol-a");
    const assign = calls.findIndex((c) => c.startsWith("btrfs qgroup assign"));
    expect(calls[assign + 1]).toBe("btrfs quota rescan -W /srv/storage");
    expect(calls[assign + 2]).toMatch(/^cp -a --reflink=always/);
  });

  it("keeps the plain folder when the copy fails: the new subvolume goes, the limit comes back", async () => {
    const { calls, run } = host([
      [/^find/, FLATTENED],
      [/^stat -c %F/, "directory\n"],
      [/^cp /, Object.assign(new Error("cp failed"), { stderr: "No space left on device" })],
      ...LISTED,
    ]);
    await expect(new StorageQuota(ROOT, run).repairLayout("vol-a")).rejects.toThrow(/cp failed/);
    expect(calls.slice(-2)).toEqual([
      `btrfs subvolume delete ${VOL}/.repair-new-workspace`,
      `btrfs qgroup limit ${32 * MiB} 1/256 /srv/storage`,
    ]);
    expect(calls.some((c) => c.startsWith("mv ") || c.startsWith("rm "))).toBe(false);
  });

  it("makes a workspace the agent removed afresh, the gateway user's", async () => {
    const { calls, run } = host([
      [/^find/, FLATTENED],
      [/^stat -c %F/, missing("workspace")],
      ...LISTED,
    ]);
    expect(await new StorageQuota(ROOT, run).repairLayout("vol-a")).toEqual(["data/workspace"]);
    expect(calls).toEqual(
      expect.arrayContaining([
        `chown 1000:1000 ${VOL}/.repair-new-workspace`,
        `chmod 700 ${VOL}/.repair-new-workspace`,
        `mv -T ${VOL}/.repair-new-workspace ${VOL}/data/workspace`,
      ]),
    );
    expect(calls.some((c) => c.startsWith("cp ") || c.startsWith("rm "))).toBe(false);
  });

  it("follows no link the gateway's user put where its workspace was", async () => {
    const { calls, run } = host([
      [/^find/, FLATTENED],
      [/^stat -c %F/, "symbolic link\n"],
      ...LISTED,
    ]);
    await expect(new StorageQuota(ROOT, run).repairLayout("vol-a")).rejects.toThrow(
      /workspace is a symbolic link/,
    );
    expect(calls.some((c) => /^(cp|mv|rm|btrfs subvolume create)/.test(c))).toBe(false);
    expect(calls.at(-1)).toBe(`btrfs qgroup limit ${32 * MiB} 1/256 /srv/storage`);
  });

  it("finishes a repair stopped between its renames, and undoes one stopped in its copy", async () => {
    // Stopped after the plain folder went aside: the copy was whole, it goes into place.
    let finds = 0;
    const between = host([
      [
        /^find/,
        () =>
          ++finds === 1
            ? `${VOL}/tmp\n${VOL}/.repair-new-workspace\n${VOL}/.repair-old-workspace\n${VOL}/.repair-old-workspace/.repair-x\n`
            : FOUND_WHOLE,
      ],
      [/^stat -c %F .*data\/workspace$/, missing("workspace")],
      [/^stat -c %F .*old-workspace$/, "directory\n"],
      ...LISTED,
    ]);
    expect(await new StorageQuota(ROOT, between.run).repairLayout("vol-a")).toEqual([]);
    expect(between.calls.filter((c) => /^(mv|rm|btrfs subvolume)/.test(c))).toEqual([
      "btrfs subvolume list -o /srv/storage",
      `mv -T ${VOL}/.repair-new-workspace ${VOL}/data/workspace`,
      `rm -rf ${VOL}/.repair-old-workspace`,
    ]);
    expect(between.calls.at(-1)).toBe(`btrfs qgroup limit ${32 * MiB} 1/256 /srv/storage`);

    // Stopped in the copy: the plain folder is still in place; the copy goes, the repair redoes.
    finds = 0;
    const copying = host([
      [/^find/, () => (++finds === 1 ? `${VOL}/tmp\n${VOL}/.repair-new-workspace\n` : FLATTENED)],
      [/^stat -c %F/, "directory\n"],
      ...LISTED,
    ]);
    expect(await new StorageQuota(ROOT, copying.run).repairLayout("vol-a")).toEqual([
      "data/workspace",
    ]);
    const deleted = copying.calls.indexOf(`btrfs subvolume delete ${VOL}/.repair-new-workspace`);
    const created = copying.calls.indexOf(`btrfs subvolume create ${VOL}/.repair-new-workspace`);
    expect(deleted).toBeGreaterThan(0);
    expect(created).toBeGreaterThan(deleted);
  });

  it("leaves a volume without a folder here and one made before the agent's own group", async () => {
    const none = host([[/^find/, missing(VOL)]]);
    expect(await new StorageQuota(ROOT, none.run).repairLayout("vol-a")).toEqual([]);
    expect(none.calls).toEqual([FIND]);
    // Decision 0216's layout: one qgroup, workspace and tmp plain folders by design.
    const single = host([
      [/^find/, ""],
      [/^btrfs qgroup show/, QGROUPS.replace(/^[12]\/256 .*\n/gm, "")],
      ...LISTED,
    ]);
    expect(await new StorageQuota(ROOT, single.run).repairLayout("vol-a")).toEqual([]);
    expect(single.calls.some((c) => /limit|create|assign/.test(c))).toBe(false);
  });
});

describe("where the repair runs", () => {
  afterEach(() => setRuntime(undefined));
  const row = { id: "ins_layout", volume_name: "vol-a" };
  const info = (state: ContainerInfo["state"]) =>
    ({ state, running: state === "running" }) as ContainerInfo;

  it("repairs before starting a created or stopped gateway, never a paused or restarting one", async () => {
    const asked: string[] = [];
    setRuntime({
      repairVolumeLayout: async (volume: string) => {
        asked.push(volume);
        return ["data/workspace"];
      },
    } as unknown as AgentRuntime);
    expect(await repairBeforeStart(row, info("created"))).toEqual(["data/workspace"]);
    expect(await repairBeforeStart(row, info("exited"))).toEqual(["data/workspace"]);
    for (const state of ["paused", "restarting", "running", "dead"] as const) {
      expect(await repairBeforeStart(row, info(state))).toEqual([]);
    }
    expect(asked).toEqual(["vol-a", "vol-a"]);
  });

  it("starts the gateway on the volume as it was when the repair fails, or the driver has none", async () => {
    setRuntime({
      repairVolumeLayout: async () => {
        throw new Error("cp: Disk quota exceeded");
      },
    } as unknown as AgentRuntime);
    expect(await repairBeforeStart(row, info("exited"))).toEqual([]);
    setRuntime({} as unknown as AgentRuntime); // the process driver
    expect(await repairBeforeStart(row, info("exited"))).toEqual([]);
  });
});
