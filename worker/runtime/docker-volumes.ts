import { finished } from "node:stream";
import type Docker from "dockerode";
import { call, statusOf } from "./docker-engine.ts";
import type { StorageQuota, VolumeUsage } from "./storage-quota.ts";
import {
  type ContainerSummary,
  LABELS,
  type Placement,
  type StorageEnforcement,
  VolumeStuckError,
} from "./types.ts";

// The Docker driver's volumes: a gateway's named state volume (a limited btrfs subvolume with
// its /tmp beside it when the storage root is set, decision 0216), their sizes, and the
// archive API's copies in and out through a never-started helper container.

/**
 * The engine's refusal to remove a bound volume it wrongly counts as mounted (moby#44422: the
 * count of a volume whose container lived through a live-restore restart; decision 0248).
 */
export function isStuckVolume(error: unknown): boolean {
  return statusOf(error) === 500 && /volume has active mounts/.test(String(error));
}

/** The Docker volume that is a limited volume's /tmp (same subvolume, same limit). */
export function tmpVolumeOf(volume: string): string {
  return `${volume}-tmp`;
}

/** Hard storage limits (decision 0216): the prepared storage root, or why there is none. */
export type DockerStorage = { quota: StorageQuota; defaultLimitBytes: number } | { reason: string };

export class DockerVolumes {
  readonly #docker: Docker;
  #quota: { quota: StorageQuota; defaultLimitBytes: number } | undefined;
  #unenforced = "no storage root configured";

  constructor(docker: Docker) {
    this.#docker = docker;
  }

  configureStorage(storage: DockerStorage): void {
    this.#quota = "quota" in storage ? storage : undefined;
    if ("reason" in storage) this.#unenforced = storage.reason;
  }

  async ensure(name: string, labels: Record<string, string>, placement?: Placement) {
    const limited = this.#quota;
    // An existing volume stays what it is (one made before the storage root keeps no limit).
    if (!limited || (await this.exists(name))) {
      // Creating an existing named volume is a no-op in Docker (idempotent).
      await call(() => this.#docker.createVolume({ Name: name, Labels: labels }));
      return;
    }
    const limit = placement?.storageLimitBytes ?? limited.defaultLimitBytes;
    await limited.quota.ensure(name, limit);
    const { data, tmp } = limited.quota.folders(name);
    // The local driver binds the subvolume's folders: Docker still copies the image's files
    // into them on first mount, and the kernel counts both against the one qgroup.
    const bind = (device: string) => ({ type: "none", o: "bind", device });
    await call(() =>
      this.#docker.createVolume({ Name: tmpVolumeOf(name), Labels: labels, DriverOpts: bind(tmp) }),
    );
    await call(() =>
      this.#docker.createVolume({ Name: name, Labels: labels, DriverOpts: bind(data) }),
    );
  }

  /** Whether the volume is a limited one (its container gets a read-only root and its /tmp). */
  async isLimited(volume: string): Promise<boolean> {
    return (await this.#quota?.quota.has(volume)) === true;
  }

  enforcement(): StorageEnforcement {
    return this.#quota
      ? { enforced: true, mechanism: `btrfs qgroups on ${this.#quota.quota.root}` }
      : { enforced: false, reason: this.#unenforced };
  }

  async setLimit(volume: string, limitBytes: number): Promise<boolean> {
    if (!this.#quota || !(await this.#quota.quota.has(volume))) return false;
    await this.#quota.quota.setLimit(volume, limitBytes);
    return true;
  }

  async repairLayout(volume: string): Promise<string[]> {
    return this.#quota ? this.#quota.quota.repairLayout(volume) : [];
  }

  /** The storage root, when its counts had gone inconsistent and were rescanned. */
  async restoreCounts(): Promise<string[]> {
    const limited = this.#quota?.quota;
    return limited && (await limited.restoreCounts()) ? [limited.root] : [];
  }

  async usage(): Promise<Map<string, VolumeUsage>> {
    return this.#quota ? this.#quota.quota.usage() : new Map();
  }

  async exists(name: string): Promise<boolean> {
    try {
      await call(() => this.#docker.getVolume(name).inspect());
      return true;
    } catch (error) {
      if (statusOf(error) === 404) return false;
      throw error;
    }
  }

  async sizes(): Promise<Map<string, number>> {
    // /system/df computes every volume's size (Docker 1.41 has no per-type filter): keep it
    // to the periodic reconcile pass.
    const df = (await call(() => this.#docker.df())) as {
      Volumes?: Array<{ Name: string; UsageData?: { Size?: number } }> | null;
    };
    const sizes = new Map<string, number>();
    for (const v of df.Volumes ?? []) {
      const size = v.UsageData?.Size ?? -1;
      if (size >= 0) sizes.set(v.Name, size);
    }
    // A limited volume's figure is the kernel's (data and tmp together); Docker's walks only
    // a volume that is mounted at that moment.
    for (const [name, usage] of await this.usage()) sizes.set(name, usage.usedBytes);
    return sizes;
  }

  async remove(name: string): Promise<void> {
    const stuck: string[] = [];
    for (const volume of [name, tmpVolumeOf(name)]) {
      try {
        await call(() => this.#docker.getVolume(volume).remove({ force: true }));
      } catch (error) {
        if (isStuckVolume(error)) stuck.push(volume);
        else if (statusOf(error) !== 404) throw error;
      }
    }
    // The subvolume stays while the engine still lists a volume bound into it.
    if (stuck.length) {
      throw new VolumeStuckError(
        `the engine counts ${stuck.join(" and ")} as still mounted ("volume has active mounts"); its next restart frees it`,
      );
    }
    await this.#quota?.quota.remove(name);
  }

  /**
   * A created, never started container with the volume at /state: Docker's archive API reads
   * it. A one-shot by role, so a dead job's leftover is found and removed like the others.
   * The image's own VOLUME gives it an anonymous volume too: removed with it (`v`), else every
   * backup, export and import left one behind on the engine's host.
   */
  async #helper(volume: string, image: string, labels: Record<string, string> = {}) {
    return call(() =>
      this.#docker.createContainer({
        Image: image,
        Entrypoint: ["true"],
        Cmd: [],
        Labels: { ...labels, [LABELS.managed]: "1", [LABELS.role]: "one-shot" },
        HostConfig: {
          NetworkMode: "none",
          Mounts: [{ Type: "volume", Source: volume, Target: "/state" }],
        },
      }),
    );
  }

  async export(
    volume: string,
    image: string,
    labels?: Record<string, string>,
  ): Promise<NodeJS.ReadableStream> {
    const helper = await this.#helper(volume, image, labels);
    try {
      const archive = await call(() => helper.getArchive({ path: "/state" }));
      finished(archive, () => {
        helper.remove({ force: true, v: true }).catch(() => {});
      });
      return archive;
    } catch (error) {
      await helper.remove({ force: true, v: true }).catch(() => {});
      throw error;
    }
  }

  async import(
    volume: string,
    image: string,
    tar: NodeJS.ReadableStream,
    labels?: Record<string, string>,
  ): Promise<void> {
    const helper = await this.#helper(volume, image, labels);
    try {
      // As long as the state takes to arrive (a restore's whole archive).
      await call(() => helper.putArchive(tar, { path: "/" }), Number.POSITIVE_INFINITY);
    } finally {
      await helper.remove({ force: true, v: true }).catch(() => {});
    }
  }

  async holders(volume: string): Promise<ContainerSummary[]> {
    const rows = await call(() =>
      this.#docker.listContainers({ all: true, filters: { volume: [volume] } }),
    );
    return rows.map((r) => ({
      id: r.Id,
      name: (r.Names[0] ?? "").replace(/^\//, ""),
      state: r.State,
      labels: r.Labels ?? {},
    }));
  }
}
