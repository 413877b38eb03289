import { finished, PassThrough } from "node:stream";
import Docker from "dockerode";
import {
  ensureIsolatedBridge,
  ensureSharedBridge,
  listNetworks,
  moveContainer,
  removeNetwork,
  type SubnetPool,
  subnetPool,
} from "./docker-networks.ts";
import type { StorageQuota, VolumeUsage } from "./storage-quota.ts";
import {
  type AgentRuntime,
  type ContainerInfo,
  type ContainerSpec,
  type ContainerState,
  type ContainerStats,
  type ContainerSummary,
  type ExecResult,
  FreezeUnavailableError,
  GATEWAY_IMAGE_LABELS,
  LABELS,
  type Placement,
  type ResourceLimits,
  RuntimeUnavailableError,
  type StorageEnforcement,
} from "./types.ts";

// The Docker driver (dockerode over the engine's socket). Hardening applied to every gateway
// container: Init (Node as PID 1 ignores SIGTERM), all capabilities dropped, no-new-privileges,
// a pids limit, memory and CPU from the plan, a named volume for state, a stable hostname, a
// bridge network of its own (docker-networks.ts) and no published port (or one on 127.0.0.1
// only).

const ENGINE_DOWN = new Set(["ECONNREFUSED", "ENOENT", "EACCES", "ECONNRESET", "EPIPE"]);
/** How long `remove` waits for a removal another caller started (seconds for a gateway). */
const REMOVAL_WAIT_MS = 30_000;

function statusOf(error: unknown): number | undefined {
  return (error as { statusCode?: number }).statusCode;
}

/** Maps "the socket does not answer" to RuntimeUnavailableError; other errors pass through. */
function wrap(error: unknown): never {
  const code = (error as NodeJS.ErrnoException).code;
  if (code && ENGINE_DOWN.has(code)) {
    throw new RuntimeUnavailableError(`Docker engine unreachable (${code})`, { cause: error });
  }
  throw error;
}

async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    return wrap(error);
  }
}

/** Splits Docker's multiplexed stdout/stderr stream (8-byte frame headers). */
export function demux(buffer: Buffer): { stdout: string; stderr: string } {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let i = 0;
  while (i + 8 <= buffer.length) {
    const type = buffer[i];
    const size = buffer.readUInt32BE(i + 4);
    const chunk = buffer.subarray(i + 8, i + 8 + size);
    (type === 2 ? err : out).push(chunk);
    i += 8 + size;
  }
  if (i === 0 && buffer.length > 0 && buffer[0] !== 1 && buffer[0] !== 2) {
    return { stdout: buffer.toString("utf8"), stderr: "" }; // a TTY stream is not framed
  }
  return {
    stdout: Buffer.concat(out).toString("utf8"),
    stderr: Buffer.concat(err).toString("utf8"),
  };
}

/** dockerode's connection options for a Docker host URL (unix:///path or tcp://host:port). */
export function engineAddress(host: string): Docker.DockerOptions {
  const url = new URL(host);
  if (url.protocol === "unix:") return { socketPath: url.pathname };
  if (url.protocol === "tcp:" || url.protocol === "http:") {
    return { host: url.hostname, port: Number(url.port || 2375), protocol: "http" };
  }
  if (url.protocol === "https:") {
    return { host: url.hostname, port: Number(url.port || 2376), protocol: "https" };
  }
  throw new Error(`unsupported Docker host ${host} (unix://, tcp:// or https://)`);
}

/** The engine's socket: DOCKER_SOCKET, else DOCKER_HOST when it names a unix socket. */
function engineSocket(): string {
  const host = process.env.DOCKER_HOST;
  if (process.env.DOCKER_SOCKET) return process.env.DOCKER_SOCKET;
  if (host?.startsWith("unix://")) return host.slice("unix://".length);
  return "/var/run/docker.sock";
}

export interface DockerDriverOptions {
  socketPath?: string;
  /** An engine given as a Docker host URL (unix:///path or tcp://host:port); wins over socketPath. */
  host?: string;
  /** Upper bound on a container's CPUs (tests keep gateways at 1). */
  maxCpus?: number;
  /** The range gateways' own networks are cut from, /28 each (RUNTIME_TENANT_SUBNETS). */
  tenantSubnets?: string;
  /** Hard storage limits (decision 0216): the prepared storage root, or why there is none. */
  storage?: { quota: StorageQuota; defaultLimitBytes: number } | { reason: string };
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

/** The Docker volume that is a limited volume's /tmp (same subvolume, same limit). */
export function tmpVolumeOf(volume: string): string {
  return `${volume}-tmp`;
}

export class DockerRuntime implements AgentRuntime {
  readonly driver = "docker" as const;
  readonly docker: Docker;
  readonly maxCpus: number | undefined;
  readonly tenantSubnets: SubnetPool;
  #quota: { quota: StorageQuota; defaultLimitBytes: number } | undefined;
  #unenforced = "no storage root configured";
  #engine: Promise<{ NCPU: number; CgroupVersion?: string; SwapLimit?: boolean }> | undefined;

  constructor(options: DockerDriverOptions = {}) {
    this.docker = new Docker(
      options.host
        ? engineAddress(options.host)
        : { socketPath: options.socketPath || engineSocket() },
    );
    this.maxCpus = options.maxCpus;
    this.tenantSubnets = subnetPool(options.tenantSubnets ?? DEFAULT_TENANT_SUBNETS);
    if (options.storage) this.configureStorage(options.storage);
  }

  /** Sets the storage root (the worker probes it at start, decision 0216). */
  configureStorage(storage: NonNullable<DockerDriverOptions["storage"]>): void {
    this.#quota = "quota" in storage ? storage : undefined;
    if ("reason" in storage) this.#unenforced = storage.reason;
  }

  async ping(): Promise<void> {
    await call(() => this.docker.ping());
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

  async ensureVolume(
    name: string,
    labels: Record<string, string>,
    placement?: Placement,
  ): Promise<void> {
    const limited = this.#quota;
    // An existing volume stays what it is (one made before the storage root keeps no limit).
    if (!limited || (await this.volumeExists(name))) {
      // Creating an existing named volume is a no-op in Docker (idempotent).
      await call(() => this.docker.createVolume({ Name: name, Labels: labels }));
      return;
    }
    const limit = placement?.storageLimitBytes ?? limited.defaultLimitBytes;
    await limited.quota.ensure(name, limit);
    const { data, tmp } = limited.quota.folders(name);
    // The local driver binds the subvolume's folders: Docker still copies the image's files
    // into them on first mount, and the kernel counts both against the one qgroup.
    const bind = (device: string) => ({ type: "none", o: "bind", device });
    await call(() =>
      this.docker.createVolume({ Name: tmpVolumeOf(name), Labels: labels, DriverOpts: bind(tmp) }),
    );
    await call(() =>
      this.docker.createVolume({ Name: name, Labels: labels, DriverOpts: bind(data) }),
    );
  }

  storageEnforcement(): StorageEnforcement {
    return this.#quota
      ? { enforced: true, mechanism: `btrfs qgroups on ${this.#quota.quota.root}` }
      : { enforced: false, reason: this.#unenforced };
  }

  async setStorageLimit(volume: string, limitBytes: number): Promise<boolean> {
    if (!this.#quota || !(await this.#quota.quota.has(volume))) return false;
    await this.#quota.quota.setLimit(volume, limitBytes);
    return true;
  }

  async storageUsage(): Promise<Map<string, VolumeUsage>> {
    return this.#quota ? this.#quota.quota.usage() : new Map();
  }

  async volumeExists(name: string): Promise<boolean> {
    try {
      await call(() => this.docker.getVolume(name).inspect());
      return true;
    } catch (error) {
      if (statusOf(error) === 404) return false;
      throw error;
    }
  }

  async volumeSizes(): Promise<Map<string, number>> {
    // /system/df computes every volume's size (Docker 1.41 has no per-type filter): keep it
    // to the periodic reconcile pass.
    const df = (await call(() => this.docker.df())) as {
      Volumes?: Array<{ Name: string; UsageData?: { Size?: number } }> | null;
    };
    const sizes = new Map<string, number>();
    for (const v of df.Volumes ?? []) {
      const size = v.UsageData?.Size ?? -1;
      if (size >= 0) sizes.set(v.Name, size);
    }
    // A limited volume's figure is the kernel's (data and tmp together); Docker's walks only
    // a volume that is mounted at that moment.
    for (const [name, usage] of await this.storageUsage()) sizes.set(name, usage.usedBytes);
    return sizes;
  }

  async removeVolume(name: string): Promise<void> {
    for (const volume of [name, tmpVolumeOf(name)]) {
      try {
        await call(() => this.docker.getVolume(volume).remove({ force: true }));
      } catch (error) {
        if (statusOf(error) !== 404) throw error;
      }
    }
    await this.#quota?.quota.remove(name);
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
    const limited = (await this.#quota?.quota.has(spec.volume)) === true;
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
      if (statusOf(error) !== 304) throw error; // already started
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
    let c: Docker.ContainerInspectInfo;
    try {
      c = await call(() => this.docker.getContainer(id).inspect());
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
    const networks = c.NetworkSettings?.Networks ?? {};
    const address = Object.values(networks).find((n) => n?.IPAddress)?.IPAddress || undefined;
    const ports: ContainerInfo["ports"] = {};
    for (const [key, bindings] of Object.entries(c.NetworkSettings?.Ports ?? {})) {
      if (!bindings) continue;
      ports[key] = bindings.map((b) => ({ hostIp: b.HostIp, hostPort: b.HostPort }));
    }
    const health = (c.State as { Health?: { Status?: string } }).Health?.Status;
    const hc = c.HostConfig as Docker.HostConfig;
    return {
      id: c.Id,
      name: c.Name.replace(/^\//, ""),
      image: c.Config.Image,
      imageId: c.Image,
      state: c.State.Status as ContainerState,
      running: c.State.Running && !c.State.Paused,
      health:
        health === "starting" || health === "healthy" || health === "unhealthy"
          ? health
          : undefined,
      oomKilled: c.State.OOMKilled,
      exitCode: c.State.ExitCode,
      restartCount: c.RestartCount,
      startedAt: c.State.StartedAt?.startsWith("0001") ? undefined : c.State.StartedAt,
      finishedAt: c.State.FinishedAt?.startsWith("0001") ? undefined : c.State.FinishedAt,
      labels: c.Config.Labels ?? {},
      address,
      networks: Object.keys(networks),
      ports,
      hostname: c.Config.Hostname,
      limits: {
        memoryBytes: hc.Memory ?? 0,
        cpuShares: hc.CpuShares ?? 0,
        nanoCpus: hc.NanoCpus ?? 0,
        pidsLimit: hc.PidsLimit ?? 0,
      },
      security: {
        init: hc.Init === true,
        capDrop: hc.CapDrop ?? [],
        securityOpt: hc.SecurityOpt ?? [],
        readOnly: hc.ReadonlyRootfs === true,
      },
      restartPolicy: hc.RestartPolicy?.Name ?? "",
      env: c.Config.Env ?? [],
      mounts: (c.Mounts ?? []).map((m) => ({
        name: m.Name,
        destination: m.Destination,
        type: m.Type,
      })),
    };
  }

  async stats(id: string): Promise<ContainerStats> {
    const s = (await call(() =>
      this.docker.getContainer(id).stats({ stream: false }),
    )) as Docker.ContainerStats;
    const cpuDelta =
      s.cpu_stats.cpu_usage.total_usage - (s.precpu_stats.cpu_usage?.total_usage ?? 0);
    const systemDelta =
      (s.cpu_stats.system_cpu_usage ?? 0) - (s.precpu_stats.system_cpu_usage ?? 0);
    const online = s.cpu_stats.online_cpus || s.cpu_stats.cpu_usage.percpu_usage?.length || 1;
    const cpuPercent =
      systemDelta > 0 && cpuDelta > 0 ? (cpuDelta / systemDelta) * online * 100 : 0;
    // Like `docker stats`: usage minus the page cache that can be reclaimed.
    const mem = s.memory_stats;
    const inactive =
      (mem.stats as Record<string, number> | undefined)?.inactive_file ??
      (mem.stats as Record<string, number> | undefined)?.total_inactive_file ??
      0;
    let rx = 0;
    let tx = 0;
    for (const n of Object.values(s.networks ?? {})) {
      rx += n.rx_bytes;
      tx += n.tx_bytes;
    }
    return {
      cpuPercent: Math.round(cpuPercent * 100) / 100,
      memoryBytes: Math.max(0, (mem.usage ?? 0) - inactive),
      memoryLimitBytes: mem.limit ?? 0,
      pids: (s as { pids_stats?: { current?: number } }).pids_stats?.current ?? 0,
      rxBytes: rx,
      txBytes: tx,
    };
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

  async exec(id: string, cmd: string[], options: { timeoutMs?: number } = {}): Promise<ExecResult> {
    const container = this.docker.getContainer(id);
    const exec = await call(() =>
      container.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true, Tty: false }),
    );
    const stream = await call(() => exec.start({ hijack: true, stdin: false }));
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    stdout.on("data", (c: Buffer) => out.push(c));
    stderr.on("data", (c: Buffer) => err.push(c));
    this.docker.modem.demuxStream(stream, stdout, stderr);
    const timeoutMs = options.timeoutMs ?? 60_000;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        stream.destroy();
        reject(new Error(`exec timed out after ${timeoutMs} ms: ${cmd.join(" ")}`));
      }, timeoutMs);
      stream.on("end", () => {
        clearTimeout(timer);
        resolve();
      });
      stream.on("close", () => {
        clearTimeout(timer);
        resolve();
      });
      stream.on("error", (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
    const info = await call(() => exec.inspect());
    return {
      exitCode: info.ExitCode ?? -1,
      stdout: Buffer.concat(out).toString("utf8"),
      stderr: Buffer.concat(err).toString("utf8"),
    };
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

  /**
   * A created, never started container with the volume at /state: Docker's archive API reads
   * it. A one-shot by role, so a dead job's leftover is found and removed like the others.
   * The image's own VOLUME gives it an anonymous volume too: removed with it (`v`), else every
   * backup, export and import left one behind on the engine's host.
   */
  private async volumeHelper(volume: string, image: string, labels: Record<string, string> = {}) {
    return call(() =>
      this.docker.createContainer({
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

  async exportVolume(
    volume: string,
    image: string,
    labels?: Record<string, string>,
  ): Promise<NodeJS.ReadableStream> {
    const helper = await this.volumeHelper(volume, image, labels);
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

  async importVolume(
    volume: string,
    image: string,
    tar: NodeJS.ReadableStream,
    labels?: Record<string, string>,
  ): Promise<void> {
    const helper = await this.volumeHelper(volume, image, labels);
    try {
      await call(() => helper.putArchive(tar, { path: "/" }));
    } finally {
      await helper.remove({ force: true, v: true }).catch(() => {});
    }
  }

  async volumeHolders(volume: string): Promise<ContainerSummary[]> {
    const rows = await call(() =>
      this.docker.listContainers({ all: true, filters: { volume: [volume] } }),
    );
    return rows.map((r) => ({
      id: r.Id,
      name: (r.Names[0] ?? "").replace(/^\//, ""),
      state: r.State,
      labels: r.Labels ?? {},
    }));
  }

  async runOnce(spec: Parameters<AgentRuntime["runOnce"]>[0]): Promise<ExecResult> {
    const container = await call(() =>
      this.docker.createContainer({
        Image: spec.image,
        Entrypoint: spec.entrypoint,
        Cmd: spec.cmd,
        Env: Object.entries(spec.env ?? {}).map(([k, v]) => `${k}=${v}`),
        Labels: { ...spec.labels, [LABELS.managed]: "1", [LABELS.role]: "one-shot" },
        User: spec.user,
        HostConfig: {
          CapDrop: ["ALL"],
          CapAdd: spec.capAdd,
          SecurityOpt: ["no-new-privileges"],
          NetworkMode: "none",
          Memory: 256 * 1024 ** 2,
          NanoCpus: 500_000_000,
          Mounts: [
            { Type: "volume", Source: spec.volume, Target: spec.volumeTarget },
            ...Object.entries(spec.extraVolumes ?? {}).map(([Source, Target]) => ({
              Type: "volume" as const,
              Source,
              Target,
            })),
          ],
        },
      }),
    );
    try {
      await call(() => container.start());
      const timeoutMs = spec.timeoutMs ?? 60_000;
      const result = (await Promise.race([
        call(() => container.wait()),
        new Promise((_, reject) =>
          setTimeout(
            () => reject(new Error(`one-shot timed out after ${timeoutMs} ms`)),
            timeoutMs,
          ).unref(),
        ),
      ])) as { StatusCode: number };
      const raw = (await call(() =>
        container.logs({ stdout: true, stderr: true, follow: false }),
      )) as unknown as Buffer;
      const { stdout, stderr } = demux(raw);
      return { exitCode: result.StatusCode, stdout, stderr };
    } finally {
      await container.remove({ force: true, v: true }).catch(() => {});
    }
  }
}
