import type Docker from "dockerode";
import { z } from "zod";
import {
  call,
  demux,
  engineAddress,
  engineClient,
  engineSocket,
  statusOf,
} from "./docker-engine.ts";
import { execIn, runOnce } from "./docker-exec.ts";
import { containerInfoOf, containerStatsOf } from "./docker-inspect.ts";
import {
  ensureIsolatedBridge,
  ensureSharedBridge,
  listNetworks,
  moveContainer,
  removeNetwork,
  type SubnetPool,
  subnetPool,
} from "./docker-networks.ts";
import { type DockerStorage, DockerVolumes, tmpVolumeOf } from "./docker-volumes.ts";
import type { VolumeUsage } from "./storage-quota.ts";
import {
  type AgentRuntime,
  type ContainerInfo,
  type ContainerSpec,
  type ContainerStats,
  type ContainerSummary,
  type ExecResult,
  FreezeUnavailableError,
  GATEWAY_IMAGE_LABELS,
  LABELS,
  type Placement,
  type ResourceLimits,
  StaleTaskError,
  type StorageEnforcement,
} from "./types.ts";

// The Docker driver (dockerode over the engine's socket). Hardening applied to every gateway
// container: Init (Node as PID 1 ignores SIGTERM), all capabilities dropped, no-new-privileges,
// a pids limit, memory and CPU from the plan, a named volume for state, a stable hostname, a
// bridge network of its own (docker-networks.ts) and no published port (or one on 127.0.0.1
// only).

/** The engine's answer to a start whose earlier task containerd still holds (decision 0239). */
export function isStaleTask(error: unknown): boolean {
  return statusOf(error) === 500 && /\btask [0-9a-f]{64}: already exists/.test(String(error));
}

/** How long `remove` waits for a removal another caller started (seconds for a gateway). */
const REMOVAL_WAIT_MS = 30_000;

export interface DockerDriverOptions {
  socketPath?: string;
  /** An engine given as a Docker host URL (unix:///path or tcp://host:port); wins over socketPath. */
  host?: string;
  /** Upper bound on a container's CPUs (tests keep gateways at 1). */
  maxCpus?: number;
  /** The range gateways' own networks are cut from, /28 each (RUNTIME_TENANT_SUBNETS). */
  tenantSubnets?: string;
  /** Hard storage limits (decision 0216): the prepared storage root, or why there is none. */
  storage?: DockerStorage;
}

/** RUNTIME_TENANT_SUBNETS' default: 4,096 networks of 16 addresses (decision 0195). */
export const DEFAULT_TENANT_SUBNETS = "10.213.0.0/16";

/**
 * `docker pause`, tried again while the kernel refuses the freeze: a process being forked in the
 * container at that instant makes runc fail with "unable to freeze" (seen in CI on a sleep, and
 * right after a provisioning on a backup's pause); the condition is momentary.
 */
async function pauseRetrying(container: Docker.Container, attempts = 3): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await call(() => container.pause());
      return;
    } catch (error) {
      if (attempt >= attempts || !/unable to freeze/.test((error as Error).message)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  }
}

export class DockerRuntime implements AgentRuntime {
  readonly driver = "docker" as const;
  readonly docker: Docker;
  readonly maxCpus: number | undefined;
  readonly tenantSubnets: SubnetPool;
  readonly volumes: DockerVolumes;
  #engine: Promise<{ NCPU: number; CgroupVersion?: string; SwapLimit?: boolean }> | undefined;

  constructor(options: DockerDriverOptions = {}) {
    this.docker = engineClient(
      options.host
        ? engineAddress(options.host)
        : { socketPath: options.socketPath || engineSocket() },
    );
    this.maxCpus = options.maxCpus;
    this.tenantSubnets = subnetPool(options.tenantSubnets ?? DEFAULT_TENANT_SUBNETS);
    this.volumes = new DockerVolumes(this.docker);
    if (options.storage) this.configureStorage(options.storage);
  }

  /** Sets the storage root (the worker probes it at start, decision 0216). */
  configureStorage(storage: DockerStorage): void {
    this.volumes.configureStorage(storage);
  }

  async ping(): Promise<void> {
    await call(() => this.docker.ping());
  }

  async liveRestore(): Promise<boolean> {
    const info = z
      .object({ LiveRestoreEnabled: z.boolean().optional() })
      .parse(await call(() => this.docker.info()));
    return info.LiveRestoreEnabled === true;
  }

  async engineCpus(): Promise<number> {
    return (await this.#engineInfo()).NCPU;
  }

  /** The engine's facts that do not change while it runs (read once). */
  #engineInfo() {
    this.#engine ??= call(() => this.docker.info()).catch((error: unknown) => {
      this.#engine = undefined;
      throw error;
    });
    return this.#engine;
  }

  async #cpuCap(wanted: number): Promise<number> {
    const cpus = (await this.#engineInfo()).NCPU;
    return Math.min(wanted, cpus ?? wanted, this.maxCpus ?? wanted);
  }

  ensureNetwork(
    name: string,
    labels: Record<string, string> = {},
  ): Promise<{ gatewayIp: string | undefined }> {
    return ensureSharedBridge(this.docker, call, name, labels);
  }

  async ensureIsolatedNetwork(name: string, labels: Record<string, string>): Promise<void> {
    await ensureIsolatedBridge(this.docker, call, name, labels, this.tenantSubnets);
  }

  removeNetwork(name: string): Promise<void> {
    return removeNetwork(this.docker, call, name);
  }

  listNetworks(
    labels: Record<string, string>,
  ): Promise<Array<{ name: string; createdAt: string }>> {
    return listNetworks(this.docker, call, labels);
  }

  moveToNetwork(container: string, from: string, to: string): Promise<void> {
    return moveContainer(this.docker, call, container, from, to);
  }

  ensureVolume(name: string, labels: Record<string, string>, placement?: Placement) {
    return this.volumes.ensure(name, labels, placement);
  }

  storageEnforcement(): StorageEnforcement {
    return this.volumes.enforcement();
  }

  setStorageLimit(volume: string, limitBytes: number): Promise<boolean> {
    return this.volumes.setLimit(volume, limitBytes);
  }

  restoreStorageCounts(): Promise<string[]> {
    return this.volumes.restoreCounts();
  }

  storageUsage(): Promise<Map<string, VolumeUsage>> {
    return this.volumes.usage();
  }

  repairVolumeLayout(volume: string): Promise<string[]> {
    return this.volumes.repairLayout(volume);
  }

  volumeExists(name: string): Promise<boolean> {
    return this.volumes.exists(name);
  }

  volumeSizes(): Promise<Map<string, number>> {
    return this.volumes.sizes();
  }

  removeVolume(name: string): Promise<void> {
    return this.volumes.remove(name);
  }

  /** The image's inspect, or undefined when the engine has no such image. */
  async #inspectImage(image: string) {
    try {
      return await call(() => this.docker.getImage(image).inspect());
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }

  async imageId(image: string): Promise<string | undefined> {
    return (await this.#inspectImage(image))?.Id;
  }

  async controlUiRoot(image: string): Promise<string | undefined> {
    const labels = (await this.#inspectImage(image))?.Config?.Labels;
    return labels?.[GATEWAY_IMAGE_LABELS.controlUiRoot] || undefined;
  }

  async create(spec: ContainerSpec): Promise<string> {
    const cpus = await this.#cpuCap(spec.limits.cpus);
    // On a limited volume the root filesystem is read-only and /tmp is the volume's own tmp:
    // everything the gateway can write is under the one limit (decision 0216).
    const limited = await this.volumes.isLimited(spec.volume);
    const port = spec.loopbackPort;
    const container = await call(() =>
      this.docker.createContainer({
        name: spec.name,
        Image: spec.image,
        Hostname: spec.hostname,
        Cmd: spec.cmd,
        Env: Object.entries({
          ...spec.env,
          // SQLite's temporary files (statement journals, an FTS table's creation) go to the
          // state's tmp/, inside the gateway's reserve, not to /tmp on the agent's side of the
          // wall (decision 0224; only SQLite reads this, the agent's tools keep /tmp).
          ...(limited ? { SQLITE_TMPDIR: `${spec.volumeTarget}/tmp` } : {}),
        }).map(([k, v]) => `${k}=${v}`),
        Labels: {
          ...spec.labels,
          [LABELS.managed]: "1",
          [LABELS.instanceId]: spec.instanceId,
          [LABELS.userId]: spec.userId,
          [LABELS.role]: "gateway",
        },
        ExposedPorts: port ? { [`${port}/tcp`]: {} } : undefined,
        HostConfig: {
          Init: true,
          CapDrop: ["ALL"],
          SecurityOpt: ["no-new-privileges"],
          Memory: spec.limits.memoryBytes,
          MemorySwap: spec.limits.memoryBytes, // no swap beyond the limit
          CpuShares: spec.limits.cpuShares,
          NanoCpus: Math.round(cpus * 1e9),
          PidsLimit: spec.limits.pidsLimit,
          RestartPolicy: { Name: spec.restartPolicy ?? "on-failure", MaximumRetryCount: 0 },
          NetworkMode: spec.network,
          ReadonlyRootfs: limited,
          Mounts: [
            { Type: "volume", Source: spec.volume, Target: spec.volumeTarget },
            ...(limited
              ? [{ Type: "volume" as const, Source: tmpVolumeOf(spec.volume), Target: "/tmp" }]
              : []),
          ],
          PortBindings: port ? { [`${port}/tcp`]: [{ HostIp: "127.0.0.1", HostPort: "" }] } : {},
          LogConfig: { Type: "json-file", Config: { "max-size": "10m", "max-file": "3" } },
        },
      }),
    );
    return container.id;
  }

  async start(id: string): Promise<void> {
    if (await this.#thaw(id)) return;
    try {
      await call(() => this.docker.getContainer(id).start());
    } catch (error) {
      if (statusOf(error) === 304) return; // already started
      if (isStaleTask(error)) {
        throw new StaleTaskError(
          `the engine kept the container's old task: ${(error as Error).message}`,
          {
            cause: error,
          },
        );
      }
      throw error;
    }
  }

  async stop(id: string, timeoutSeconds = 10): Promise<void> {
    await this.#thaw(id); // a frozen gateway cannot take its SIGTERM
    try {
      await call(() => this.docker.getContainer(id).stop({ t: timeoutSeconds }));
    } catch (error) {
      if (statusOf(error) !== 304) throw error; // already stopped
    }
  }

  async restart(id: string, timeoutSeconds = 10): Promise<void> {
    await this.#thaw(id);
    await call(() => this.docker.getContainer(id).restart({ t: timeoutSeconds }));
  }

  async setRestartPolicy(id: string, policy: "no" | "on-failure"): Promise<void> {
    await call(() =>
      this.docker
        .getContainer(id)
        .update({ RestartPolicy: { Name: policy, MaximumRetryCount: 0 } }),
    );
  }

  /**
   * Pauses the container (the cgroup freezer), then lowers its memory limit to `keepBytes` with
   * its memory+swap limit at the old limit: the kernel writes what no longer fits out to swap.
   * On cgroup v1 a limit the kernel cannot reclaim down to is refused (EBUSY), never enforced
   * by killing; cgroup v2 would OOM-kill instead, so it is refused here (decision 0178).
   */
  async freeze(id: string, keepBytes: number): Promise<void> {
    const engine = await this.#engineInfo();
    if (engine.CgroupVersion === "2") {
      throw new FreezeUnavailableError("the engine uses cgroup v2 (only cgroup v1 freezes)");
    }
    if (engine.SwapLimit === false) {
      throw new FreezeUnavailableError("the engine has no swap accounting");
    }
    const container = this.docker.getContainer(id);
    const c = await call(() => container.inspect());
    const limit = c.HostConfig.Memory ?? 0;
    if (!c.State.Running || c.State.Paused) {
      throw new FreezeUnavailableError(`the container is ${c.State.Status}, not running`);
    }
    if (limit <= keepBytes) throw new FreezeUnavailableError("the container's limit is too low");
    await pauseRetrying(container);
    // Some of it cannot go to swap (kernel memory, pages in flight): runc gives up when the
    // usage stays above the new limit, so a floor is tried, then twice it, then four times.
    let refused: unknown;
    for (const floor of [keepBytes, keepBytes * 2, keepBytes * 4]) {
      if (floor >= limit) break;
      try {
        await call(() => container.update({ Memory: floor, MemorySwap: limit }));
        return;
      } catch (error) {
        refused = error;
      }
    }
    await this.#thaw(id);
    throw new FreezeUnavailableError(
      `its memory could not be moved to swap (${(refused as Error).message.trim()})`,
      { cause: refused },
    );
  }

  async resize(id: string, limits: ResourceLimits): Promise<void> {
    const cpus = await this.#cpuCap(limits.cpus);
    await call(() =>
      this.docker.getContainer(id).update({
        Memory: limits.memoryBytes,
        MemorySwap: limits.memoryBytes, // as created: no swap while awake
        CpuShares: limits.cpuShares,
        NanoCpus: Math.round(cpus * 1e9),
        PidsLimit: limits.pidsLimit,
      }),
    );
  }

  async setCpuShares(id: string, shares: number): Promise<void> {
    await call(() => this.docker.getContainer(id).update({ CpuShares: shares }));
  }

  async pauseForCopy(id: string): Promise<() => Promise<void>> {
    const container = this.docker.getContainer(id);
    try {
      await call(() => container.pause());
    } catch (error) {
      // Gone (404), or not running, restarting or already paused (409): nothing to hold.
      if (statusOf(error) === 404 || statusOf(error) === 409) return async () => {};
      throw error;
    }
    return async () => {
      try {
        await call(() => container.unpause());
      } catch (error) {
        if (statusOf(error) !== 409 && statusOf(error) !== 404) throw error; // stopped meanwhile
      }
    };
  }

  /**
   * Undoes a freeze: the memory limit back to the memory+swap limit (every container is created
   * with the two equal, so a lower one is a freeze's), then unpaused. True when it was paused.
   */
  async #thaw(id: string): Promise<boolean> {
    const container = this.docker.getContainer(id);
    let c: Docker.ContainerInspectInfo;
    try {
      c = await call(() => container.inspect());
    } catch (error) {
      if (statusOf(error) === 404) return false;
      throw error;
    }
    const { Memory: memory = 0, MemorySwap: swap = 0 } = c.HostConfig;
    if (memory > 0 && swap > memory) {
      await call(() => container.update({ Memory: swap, MemorySwap: swap }));
    }
    if (!c.State.Paused) return false;
    try {
      await call(() => container.unpause());
    } catch (error) {
      if (statusOf(error) !== 409) throw error; // unpaused meanwhile
    }
    return true;
  }

  async remove(id: string): Promise<void> {
    try {
      // v: anonymous volumes only (the image declares one); named volumes are never removed here.
      await call(() => this.docker.getContainer(id).remove({ force: true, v: true }));
    } catch (error) {
      const status = statusOf(error);
      if (status === 404) return;
      if (status !== 409) throw error;
      // Another removal of it is under way (a volume helper's own clean-up, another worker):
      // done only once it is gone, or removing the volume it holds next fails "in use" (a
      // teardown then waited out its job's 30-60 s retry).
      const deadline = Date.now() + REMOVAL_WAIT_MS;
      while (await this.inspect(id)) {
        if (Date.now() > deadline) {
          throw new Error(`container ${id} is still being removed after ${REMOVAL_WAIT_MS} ms`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }

  async inspect(id: string): Promise<ContainerInfo | undefined> {
    try {
      return containerInfoOf(await call(() => this.docker.getContainer(id).inspect()));
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }

  async stats(id: string): Promise<ContainerStats> {
    return containerStatsOf(
      (await call(() =>
        this.docker.getContainer(id).stats({ stream: false }),
      )) as Docker.ContainerStats,
    );
  }

  async logs(id: string, options: { tail?: number } = {}): Promise<string> {
    const raw = (await call(() =>
      this.docker.getContainer(id).logs({
        stdout: true,
        stderr: true,
        follow: false,
        tail: options.tail ?? 200,
        timestamps: false,
      }),
    )) as unknown as Buffer;
    const { stdout, stderr } = demux(Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw)));
    return stdout + stderr;
  }

  exec(id: string, cmd: string[], options: { timeoutMs?: number } = {}): Promise<ExecResult> {
    return execIn(this.docker, id, cmd, options);
  }

  async list(labels: Record<string, string>): Promise<ContainerSummary[]> {
    const filters = { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) };
    const rows = await call(() => this.docker.listContainers({ all: true, filters }));
    return rows.map((r) => ({
      id: r.Id,
      name: (r.Names[0] ?? "").replace(/^\//, ""),
      state: r.State,
      labels: r.Labels ?? {},
    }));
  }

  exportVolume(
    volume: string,
    image: string,
    labels?: Record<string, string>,
  ): Promise<NodeJS.ReadableStream> {
    return this.volumes.export(volume, image, labels);
  }

  importVolume(
    volume: string,
    image: string,
    tar: NodeJS.ReadableStream,
    labels?: Record<string, string>,
  ): Promise<void> {
    return this.volumes.import(volume, image, tar, labels);
  }

  volumeHolders(volume: string): Promise<ContainerSummary[]> {
    return this.volumes.holders(volume);
  }

  runOnce(spec: Parameters<AgentRuntime["runOnce"]>[0]): Promise<ExecResult> {
    return runOnce(this.docker, spec);
  }
}
