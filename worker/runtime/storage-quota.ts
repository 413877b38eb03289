import { execFile } from "node:child_process";
import { mkdir, stat } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";

// Hard storage limits for gateway volumes (decision 0216): every limited volume is a btrfs
// subvolume under the storage root (a filesystem deploy/host-storage.sh prepares, quotas on),
// with a qgroup limit on its referenced bytes. The subvolume holds two folders, `data` (the
// Docker volume mounted as the gateway's state) and `tmp` (its /tmp), so both count against one
// limit; the kernel refuses a write past it (EDQUOT) and reports the usage. This kernel has no
// ext4/XFS project quotas (CONFIG_QFMT_V2 and CONFIG_XFS_QUOTA unset), hence btrfs.

export type Run = (file: string, args: string[]) => Promise<string>;

const execFileAsync = promisify(execFile);
const run: Run = async (file, args) => (await execFileAsync(file, args)).stdout;

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

/** `btrfs subvolume list -o` rows: path (relative to the filesystem) → subvolume id. */
export function parseSubvolumes(out: string): Map<string, string> {
  const ids = new Map<string, string>();
  for (const line of out.split("\n")) {
    const m = /^ID (\d+) .* path (.+)$/.exec(line.trim());
    if (m?.[1] && m[2]) ids.set(path.basename(m[2]), m[1]);
  }
  return ids;
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

  /** The folders of a limited volume (data: the state volume's device; tmp: the gateway's /tmp). */
  folders(volume: string): { subvolume: string; data: string; tmp: string } {
    const subvolume = folderOf(this.root, volume);
    return { subvolume, data: path.join(subvolume, "data"), tmp: path.join(subvolume, "tmp") };
  }

  async has(volume: string): Promise<boolean> {
    try {
      return (await stat(this.folders(volume).data)).isDirectory();
    } catch {
      return false;
    }
  }

  /** Creates the subvolume and its folders (idempotent); a new one starts at `limitBytes`. */
  async ensure(volume: string, limitBytes: number): Promise<void> {
    const { subvolume, data, tmp } = this.folders(volume);
    const exists = await stat(subvolume).then(
      () => true,
      () => false,
    );
    if (!exists) {
      await this.#run("btrfs", ["subvolume", "create", subvolume]);
      await this.setLimit(volume, limitBytes);
    }
    // Docker copies the image's folder (owner, mode, contents) into an empty volume on first
    // mount; /tmp's sticky, world-writable mode is set here for a gateway whose image has none.
    await mkdir(data, { recursive: true });
    await mkdir(tmp, { recursive: true, mode: 0o1777 });
  }

  /**
   * Sets the limit live (raise or lower; a lower one than the data keeps the data and refuses
   * further writes). Given by qgroup id on the root: on the subvolume's own path btrfs needs a
   * write reservation inside it, which a full subvolume refuses (EDQUOT), so a full volume could
   * not be raised.
   */
  async setLimit(volume: string, limitBytes: number): Promise<void> {
    const id = (await this.#subvolumeIds()).get(volume);
    if (!id) throw new Error(`no limited volume ${volume}`);
    await this.#run("btrfs", [
      "qgroup",
      "limit",
      String(Math.max(1, Math.floor(limitBytes))),
      `0/${id}`,
      this.root,
    ]);
  }

  /** Kernel-accounted usage and limit of every limited volume (two commands for all). */
  async usage(): Promise<Map<string, VolumeUsage>> {
    const [ids, groups] = await Promise.all([
      this.#subvolumeIds(),
      this.#run("btrfs", ["qgroup", "show", "--raw", "-re", "--sync", this.root]).then(
        parseQgroups,
      ),
    ]);
    const usage = new Map<string, VolumeUsage>();
    for (const [volume, id] of ids) {
      const group = groups.get(`0/${id}`);
      if (group) usage.set(volume, group);
    }
    return usage;
  }

  /** Deletes the subvolume (its data and tmp) and its qgroup; a missing one is fine. */
  async remove(volume: string): Promise<void> {
    const { subvolume } = this.folders(volume);
    const id = (await this.#subvolumeIds()).get(volume);
    if (!id) return;
    await this.#run("btrfs", ["subvolume", "delete", subvolume]);
    // The qgroup outlives its subvolume until removed (else `qgroup show` lists it for ever).
    await this.#run("btrfs", ["qgroup", "destroy", `0/${id}`, this.root]).catch(() => "");
  }

  async #subvolumeIds(): Promise<Map<string, string>> {
    return parseSubvolumes(await this.#run("btrfs", ["subvolume", "list", "-o", this.root]));
  }
}
