import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import {
  GATEWAY_UID,
  inspectLayout,
  layoutWhole,
  type Run,
  repairLayout,
  stderrOf,
} from "./storage-layout.ts";

// Hard storage limits for gateway volumes (decision 0216): every limited volume is a btrfs
// subvolume under the storage root (a filesystem deploy/host-storage.sh prepares, quotas on).
// It holds `data` (the Docker volume mounted as the gateway's state) and `tmp` (its /tmp); the
// kernel refuses a write past the limit (EDQUOT) and reports the usage. This kernel has no
// ext4/XFS project quotas (CONFIG_QFMT_V2 and CONFIG_XFS_QUOTA unset), hence btrfs.
//
// The agent's files hit their wall first (decision 0224): `data/workspace` and `tmp` are nested
// subvolumes in a qgroup `1/<id>` limited to the sold limit less a reserve, and that group and
// the volume's own `0/<id>` (the gateway's state: its SQLite database, sessions, config) are in
// `2/<id>`, limited to the sold limit. An agent that fills its workspace and /tmp leaves the
// gateway its reserve to keep recording turns. A volume made before this keeps one qgroup. A
// volume whose workspace an update's copy flattened (before decision 0227) is made nested again
// before its gateway starts (storage-layout.ts, decision 0235).
//
// Every command, file operations included, goes through a Run: the worker's own host's
// (execFile), or a Swarm node's (node-storage.ts: exec'd on that node's host, decision 0228).

export type { Run } from "./storage-layout.ts";

const execFileAsync = promisify(execFile);
const MiB = 1024 ** 2;

/**
 * The part of a limit kept for the gateway's own state (decision 0224): 5 %, at least 64 MiB
 * (a day of busy sessions and the SQLite WAL) and at most 1 GiB, never more than half.
 */
export function gatewayReserveBytes(limitBytes: number): number {
  const reserve = Math.min(Math.max(limitBytes * 0.05, 64 * MiB), 1024 * MiB);
  return Math.floor(Math.min(reserve, limitBytes / 2));
}
/** The agent's group's limit under a volume's `limitBytes`: that less the gateway's reserve. */
const agentLimitOf = (limitBytes: number) =>
  Math.max(1, limitBytes - gatewayReserveBytes(limitBytes));
const run: Run = async (file, args) => (await execFileAsync(file, args)).stdout;

/** `qgroup show`'s stderr alone (its warnings), for the root given as $0. */
const SHOW_WARNINGS = 'btrfs qgroup show "$0" 2>&1 >/dev/null';

export interface VolumeUsage {
  usedBytes: number;
  /** The qgroup's limit; undefined when the subvolume has none. */
  limitBytes: number | undefined;
}

/** A volume name as a folder name: Docker volume names are [A-Za-z0-9][A-Za-z0-9_.-]*. */
const VOLUME_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

function folderOf(root: string, volume: string): string {
  if (!VOLUME_NAME.test(volume)) throw new Error(`not a volume name: ${volume}`);
  return path.join(root, volume);
}

/** `btrfs qgroup show --raw -re` rows: qgroupid → referenced bytes and max referenced. */
export function parseQgroups(out: string): Map<string, VolumeUsage> {
  const rows = new Map<string, VolumeUsage>();
  for (const line of out.split("\n")) {
    const m = /^(\d+\/\d+)\s+(\d+)\s+\d+\s+(\d+|none)(\s|$)/.exec(line.trim());
    if (!m?.[1] || !m[2] || !m[3]) continue;
    rows.set(m[1], {
      usedBytes: Number(m[2]),
      limitBytes: m[3] === "none" ? undefined : Number(m[3]),
    });
  }
  return rows;
}

/** `btrfs subvolume list -o` rows: id and path (relative to the filesystem). */
export function parseSubvolumeRows(out: string): Array<{ id: string; path: string }> {
  const rows: Array<{ id: string; path: string }> = [];
  for (const line of out.split("\n")) {
    const m = /^ID (\d+) .* path (.+)$/.exec(line.trim());
    if (m?.[1] && m[2]) rows.push({ id: m[1], path: m[2] });
  }
  return rows;
}

/** `btrfs subvolume list -o` of the root (its direct children): volume name → subvolume id. */
export function parseSubvolumes(out: string): Map<string, string> {
  return new Map(parseSubvolumeRows(out).map((row) => [path.basename(row.path), row.id]));
}

export class StorageQuota {
  readonly root: string;
  readonly #run: Run;

  constructor(root: string, runner: Run = run) {
    this.root = root;
    this.#run = runner;
  }

  /**
   * The storage root as a limiter, or why it cannot limit: not a btrfs mount, or its quotas are
   * off. Run once at worker start; the answer is logged and shown in /ops (never silent).
   */
  static async probe(
    root: string | undefined,
    runner: Run = run,
  ): Promise<{ quota: StorageQuota } | { reason: string }> {
    if (!root) return { reason: "STORAGE_ROOT is not set (deploy/host-storage.sh prepares one)" };
    try {
      const type = (await runner("stat", ["-f", "-c", "%T", root])).trim();
      if (type !== "btrfs") return { reason: `${root} is ${type}, not the prepared btrfs` };
      await runner("btrfs", ["qgroup", "show", root]);
    } catch (error) {
      const detail = (error as { stderr?: string }).stderr?.trim() || (error as Error).message;
      return { reason: `${root} cannot limit volumes: ${detail.split("\n")[0]}` };
    }
    return { quota: new StorageQuota(root, runner) };
  }

  /**
   * Whether the kernel's counts are true. Once btrfs marks them inconsistent (an assign of a
   * subvolume sharing data, a dropped deep tree, an interrupted operation) it enforces no limit
   * at all until a rescan: measured on kernel 6.18, a 96 MiB write went through a 64 MiB limit
   * (decision 0243). btrfs-progs says so only on `qgroup show`'s stderr.
   */
  async consistent(): Promise<boolean> {
    const warned = await this.#run("sh", ["-c", SHOW_WARNINGS, this.root]);
    return !/inconsistent/i.test(warned);
  }

  /**
   * Rescans when the counts are not consistent, waiting for it (one already running: for that
   * one); true when it did. The limits hold again once it ends.
   */
  async restoreCounts(): Promise<boolean> {
    if (await this.consistent()) return false;
    try {
      await this.#run("btrfs", ["quota", "rescan", "-w", this.root]);
    } catch (error) {
      if (!/in progress/i.test(stderrOf(error))) throw error;
      await this.#run("btrfs", ["quota", "rescan", "-W", this.root]);
    }
    return true;
  }

  /** The folders of a limited volume (data: the state volume's device; tmp: the gateway's /tmp). */
  folders(volume: string): { subvolume: string; data: string; tmp: string } {
    const subvolume = folderOf(this.root, volume);
    return { subvolume, data: path.join(subvolume, "data"), tmp: path.join(subvolume, "tmp") };
  }

  async has(volume: string): Promise<boolean> {
    return (await this.#typeOf(this.folders(volume).data)) === "directory";
  }

  /** `stat`'s file type of a path, or undefined when there is none. */
  async #typeOf(target: string): Promise<string | undefined> {
    try {
      return (await this.#run("stat", ["-c", "%F", target])).trim();
    } catch {
      return undefined;
    }
  }

  /** A folder made for the gateway's user (0700), through the runner: it may be on another host. */
  async #gatewayFolder(folder: string): Promise<void> {
    await this.#run("mkdir", ["-p", "-m", "700", folder]);
    await this.#run("chown", [`${GATEWAY_UID}:${GATEWAY_UID}`, folder]);
  }

  /**
   * Creates the subvolume, its nested agent subvolumes and their qgroups (idempotent); a new one
   * starts at `limitBytes`. The state folder is the gateway user's (Docker copies the image's
   * owner only into an empty volume, and `data` holds the workspace subvolume from the start).
   */
  async ensure(volume: string, limitBytes: number): Promise<void> {
    const { subvolume, data, tmp } = this.folders(volume);
    const workspace = path.join(data, "workspace");
    if ((await this.#typeOf(subvolume)) === undefined) {
      await this.#run("btrfs", ["subvolume", "create", subvolume]);
      await this.#gatewayFolder(data);
      // The state's tmp/ (OpenClaw's locks; SQLite's temporary files, SQLITE_TMPDIR) from the
      // start, so SQLite never falls back to /tmp.
      await this.#gatewayFolder(path.join(data, "tmp"));
      await this.#run("btrfs", ["subvolume", "create", workspace]);
      await this.#run("chmod", ["700", workspace]);
      await this.#run("chown", [`${GATEWAY_UID}:${GATEWAY_UID}`, workspace]);
      await this.#run("btrfs", ["subvolume", "create", tmp]);
      await this.#group(volume);
      await this.setLimit(volume, limitBytes);
    }
    // /tmp's sticky, world-writable mode (Docker copies the image's /tmp into it on first mount).
    await this.#run("mkdir", ["-p", data, tmp]);
    await this.#run("chmod", ["1777", tmp]);
  }

  /** The qgroup hierarchy of a new volume: 1/<id> = workspace + tmp; 2/<id> = 0/<id> + 1/<id>. */
  async #group(volume: string): Promise<void> {
    const id = await this.#idOf(volume);
    const nested = parseSubvolumeRows(
      await this.#run("btrfs", ["subvolume", "list", "-o", this.folders(volume).subvolume]),
    );
    const qgroup = (...args: string[]) => this.#run("btrfs", ["qgroup", ...args, this.root]);
    await qgroup("create", `1/${id}`);
    await qgroup("create", `2/${id}`);
    for (const row of nested) await qgroup("assign", `0/${row.id}`, `1/${id}`);
    await qgroup("assign", `0/${id}`, `2/${id}`);
    await qgroup("assign", `1/${id}`, `2/${id}`);
  }

  /**
   * Makes the agent's subvolumes nested in its group again where an update's copy before
   * decision 0227 flattened them (decision 0235); returns the paths repaired. One `find` when
   * there is nothing to do. Only while no gateway writes the volume. A volume made before the
   * agent's own group (one qgroup, decision 0224) or without a folder here: left as it is.
   */
  async repairLayout(volume: string): Promise<string[]> {
    const { subvolume } = this.folders(volume);
    const state = await inspectLayout(this.#run, subvolume);
    if (!state || layoutWhole(state)) return [];
    const id = await this.#idOf(volume);
    const groups = await this.#qgroups(false);
    if (!groups.has(`1/${id}`)) return [];
    const whole = groups.get(`2/${id}`)?.limitBytes;
    const agentLimitBytes = whole === undefined ? undefined : agentLimitOf(whole);
    const target = { root: this.root, subvolume, group: `1/${id}`, agentLimitBytes };
    return repairLayout(this.#run, target, state);
  }

  /**
   * Sets the limit live (raise or lower; a lower one than the data keeps the data and refuses
   * further writes): the volume's group to `limitBytes`, its agent group to that less the
   * gateway's reserve. Given by qgroup id on the root: on the subvolume's own path btrfs needs a
   * write reservation inside it, which a full subvolume refuses (EDQUOT), so a full volume could
   * not be raised.
   */
  async setLimit(volume: string, limitBytes: number): Promise<void> {
    const id = await this.#idOf(volume);
    const limit = Math.max(1, Math.floor(limitBytes));
    const groups = await this.#qgroups();
    const limitOf = (bytes: number | "none", group: string) =>
      this.#run("btrfs", ["qgroup", "limit", String(bytes), group, this.root]);
    if (!groups.has(`2/${id}`)) {
      await limitOf(limit, `0/${id}`); // a volume made before the agent's own group
      return;
    }
    // Raising: the whole first, so the agent's group never exceeds it; lowering: the agent's.
    const agent = agentLimitOf(limit);
    const current = groups.get(`2/${id}`)?.limitBytes;
    if (current === undefined || limit >= current) {
      await limitOf(limit, `2/${id}`);
      await limitOf(agent, `1/${id}`);
    } else {
      await limitOf(agent, `1/${id}`);
      await limitOf(limit, `2/${id}`);
    }
  }

  /**
   * Kernel-accounted usage and limit of every limited volume (two commands for all). With the
   * agent's own group, the unused part of the gateway's reserve counts as used: the agent's
   * files are at their wall when this says full.
   */
  async usage(): Promise<Map<string, VolumeUsage>> {
    const [ids, groups] = await Promise.all([this.#subvolumeIds(), this.#qgroups()]);
    const usage = new Map<string, VolumeUsage>();
    for (const [volume, id] of ids) {
      const whole = groups.get(`2/${id}`);
      const agent = groups.get(`1/${id}`);
      if (whole && agent) {
        const reserve =
          whole.limitBytes !== undefined && agent.limitBytes !== undefined
            ? whole.limitBytes - agent.limitBytes
            : 0;
        usage.set(volume, {
          usedBytes: Math.max(whole.usedBytes, agent.usedBytes + reserve),
          limitBytes: whole.limitBytes,
        });
        continue;
      }
      const group = groups.get(`0/${id}`);
      if (group) usage.set(volume, group);
    }
    return usage;
  }

  /**
   * Deletes the subvolume (its data and tmp, nested ones first) and its qgroups; a missing one
   * is fine. The limits go first: btrfs needs a reservation to delete, which a full qgroup
   * refuses (EDQUOT).
   */
  async remove(volume: string): Promise<void> {
    const { subvolume } = this.folders(volume);
    const id = (await this.#subvolumeIds()).get(volume);
    if (!id) return;
    const groups = [`2/${id}`, `1/${id}`, `0/${id}`];
    const known = await this.#qgroups();
    for (const group of groups) {
      if (known.get(group)?.limitBytes !== undefined) {
        await this.#run("btrfs", ["qgroup", "limit", "none", group, this.root]);
      }
    }
    const nested = parseSubvolumeRows(
      await this.#run("btrfs", ["subvolume", "list", "-o", subvolume]),
    );
    for (const row of nested) {
      // Listed relative to the filesystem's top: the part below the volume's own folder.
      const below = row.path.slice(row.path.lastIndexOf(`${volume}/`) + volume.length + 1);
      await this.#run("btrfs", ["subvolume", "delete", path.join(subvolume, below)]);
    }
    await this.#run("btrfs", ["subvolume", "delete", subvolume]);
    // A qgroup outlives its subvolume until removed (else `qgroup show` lists it for ever);
    // btrfs answers busy until it has freed the data, so a stale one may stay (ignored).
    for (const row of nested) groups.push(`0/${row.id}`);
    for (const group of groups) {
      await this.#run("btrfs", ["qgroup", "destroy", group, this.root]).catch(() => "");
    }
  }

  async #idOf(volume: string): Promise<string> {
    const id = (await this.#subvolumeIds()).get(volume);
    if (!id) throw new Error(`no limited volume ${volume}`);
    return id;
  }

  /** Without `sync` the counts may lag by a commit (the groups and limits are exact). */
  async #qgroups(sync = true): Promise<Map<string, VolumeUsage>> {
    const show = ["qgroup", "show", "--raw", "-re", ...(sync ? ["--sync"] : []), this.root];
    return parseQgroups(await this.#run("btrfs", show));
  }

  async #subvolumeIds(): Promise<Map<string, string>> {
    return parseSubvolumes(await this.#run("btrfs", ["subvolume", "list", "-o", this.root]));
  }
}
