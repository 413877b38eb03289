// The container runtime behind one interface: the worker drives instances through it and never
// calls a driver's API directly. Only worker code imports worker/runtime/* (the web never holds
// the Docker socket, docs/decisions/0030-agent-runtime.md).

/** Labels every object the platform creates carries, so it can find (and clean up) them. */
export const LABELS = {
  managed: "agent-platform.managed",
  instanceId: "agent-platform.instance-id",
  userId: "agent-platform.user-id",
  role: "agent-platform.role",
  /** The job (queue name, id, attempt) that created the object: reconcile removes what a dead one left. */
  job: "agent-platform.job",
  jobId: "agent-platform.job-id",
  jobAttempt: "agent-platform.job-attempt",
} as const;

/** Labels gateway/build.sh puts on the gateway images it builds. */
export const GATEWAY_IMAGE_LABELS = {
  /** The image's copy of OpenClaw's Control UI (a folder with index.html), read-only. */
  controlUiRoot: "agent-gateway.control-ui-root",
} as const;

export interface ResourceLimits {
  memoryBytes: number;
  /** Relative CPU weight (Docker CpuShares, 1024 = one share). */
  cpuShares: number;
  /** Hard CPU cap in CPUs (Docker NanoCpus / 1e9); clamped to the engine's CPU count. */
  cpus: number;
  pidsLimit: number;
}

export interface ContainerSpec {
  instanceId: string;
  userId: string;
  image: string;
  /** Stable per instance: the gateway's state lease is keyed by hostname (gateway/README.md). */
  hostname: string;
  name: string;
  volume: string;
  /** Where the volume is mounted in the container. */
  volumeTarget: string;
  network: string;
  limits: ResourceLimits;
  /** Only the instance's own secrets (gateway token); never a platform secret. */
  env: Record<string, string>;
  cmd?: string[];
  /** Extra labels (tests mark their objects so a cleanup can find them). */
  labels?: Record<string, string>;
  /** Publish the container port on 127.0.0.1 only (a random host port). Default: not published. */
  loopbackPort?: number;
  restartPolicy?: "no" | "on-failure" | "unless-stopped";
}

export type ContainerState =
  | "created"
  | "running"
  | "paused"
  | "restarting"
  | "removing"
  | "exited"
  | "dead";

export interface ContainerInfo {
  id: string;
  name: string;
  image: string;
  imageId: string;
  state: ContainerState;
  /** The gateway's process can serve: false for a paused (frozen) container. */
  running: boolean;
  /** Docker's health check, when the image defines one. */
  health: "starting" | "healthy" | "unhealthy" | undefined;
  oomKilled: boolean;
  exitCode: number;
  restartCount: number;
  startedAt: string | undefined;
  finishedAt: string | undefined;
  labels: Record<string, string>;
  /** The container's address on its network (reach the gateway there). */
  address: string | undefined;
  /** The networks it is attached to, by name (the Docker driver). */
  networks?: string[];
  /** The cluster node the instance is pinned to (the Swarm driver). */
  node?: string;
  /** host:port of the gateway when the driver chooses the port (the process driver). */
  endpoint?: string;
  /** Host ports published, e.g. { "18789/tcp": [{hostIp, hostPort}] }. */
  ports: Record<string, Array<{ hostIp: string; hostPort: string }>>;
  hostname: string;
  limits: { memoryBytes: number; cpuShares: number; nanoCpus: number; pidsLimit: number };
  security: { init: boolean; capDrop: string[]; securityOpt: string[]; readOnly: boolean };
  restartPolicy: string;
  env: string[];
  mounts: Array<{ name: string | undefined; destination: string; type: string }>;
}

export interface ContainerSummary {
  id: string;
  name: string;
  state: string;
  labels: Record<string, string>;
}

export interface ContainerStats {
  cpuPercent: number;
  memoryBytes: number;
  memoryLimitBytes: number;
  pids: number;
  rxBytes: number;
  txBytes: number;
}

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Where a new instance's state volume goes (multi-node drivers; one-host drivers ignore it). */
export interface Placement {
  limits: ResourceLimits;
  /** A node chosen by the caller (a warm pool filled node by node) instead of by capacity. */
  node?: string;
  /** A new volume's hard storage limit where the driver limits storage (decision 0216). */
  storageLimitBytes?: number;
}

/** Whether the driver holds gateways to a hard storage limit, and if not, why (0216). */
export type StorageEnforcement =
  | { enforced: true; mechanism: string }
  | { enforced: false; reason: string };

export interface AgentRuntime {
  readonly driver: "docker" | "process" | "swarm";
  /** Throws RuntimeUnavailableError when the engine does not answer. */
  ping(): Promise<void>;
  /**
   * Whether the engine keeps its containers running while it restarts (Docker's live-restore,
   * decision 0239), read afresh: an engine may come back with another setting. A driver
   * without the method has no such setting.
   */
  liveRestore?(): Promise<boolean>;
  /**
   * The CPUs of the host the gateways run on (decision 0251: the host's chat-turn budget). A
   * multi-node driver's nodes each carry theirs (`nodes()`); a driver without it cannot tell.
   */
  engineCpus?(): Promise<number>;
  /**
   * The shared network (created when missing) and its gateway address: where the host (the AI
   * endpoint's relay) answers containers. On a driver that isolates gateways no gateway joins it.
   */
  ensureNetwork(
    name: string,
    labels?: Record<string, string>,
  ): Promise<{ gatewayIp: string | undefined }>;
  /**
   * A network for one gateway alone, created when missing: nothing on it reaches another
   * tenant's network, and no other container can take an address on it (decision 0195).
   * The Swarm driver's, with its isolateGateways option, is an overlay shared with the
   * platform's own containers only (decision 0201); without, its gateways share one overlay.
   * The process driver has none (no network at all): its gateways share the host.
   */
  ensureIsolatedNetwork?(name: string, labels: Record<string, string>): Promise<void>;
  /**
   * Connects the platform's own containers that are missing from the labelled gateway networks
   * (a web replica started after them) to them; returns how many connections were made. Only
   * drivers whose gateways reach the platform over their own network need it (Swarm).
   */
  attachPlatform?(labels: Record<string, string>): Promise<number>;
  /** The ids of the running platform containers that attachPlatform joins, on every node. */
  platformContainers?(): Promise<string[]>;
  /** Removes a network (a missing one is fine; one with containers on it throws). */
  removeNetwork?(name: string): Promise<void>;
  /** The networks carrying every given label (createdAt: ISO 8601). */
  listNetworks?(
    labels: Record<string, string>,
  ): Promise<Array<{ name: string; createdAt: string }>>;
  /** Attaches a container to `to` and detaches it from `from`, running or not. */
  moveToNetwork?(container: string, from: string, to: string): Promise<void>;
  /**
   * Creates the volume when missing. `placement` says what the instance it belongs to will
   * reserve: a multi-node driver places a new state volume (and so the instance) by it, on
   * `node` when given (NoCapacityError when that node cannot take it).
   */
  ensureVolume(name: string, labels: Record<string, string>, placement?: Placement): Promise<void>;
  removeVolume(name: string): Promise<void>;
  volumeExists(name: string): Promise<boolean>;
  /** Hard storage limits (decision 0216); a driver without the method enforces none. */
  storageEnforcement?(): StorageEnforcement;
  /** Changes a limited volume's limit live; false when the volume has no limit to change. */
  setStorageLimit?(volume: string, limitBytes: number): Promise<boolean>;
  /**
   * Rescans a storage root whose counts the kernel marked inconsistent: btrfs enforces no limit
   * then (decision 0243). Where it did, for the log; before usage is read.
   */
  restoreStorageCounts?(): Promise<string[]>;
  /** Kernel-measured usage and limit of every limited volume. */
  storageUsage?(): Promise<Map<string, { usedBytes: number; limitBytes: number | undefined }>>;
  /**
   * A limited volume's agent subvolumes made nested again where an old update's copy flattened
   * them (decision 0235); the paths repaired. Only while no container writes the volume.
   */
  repairVolumeLayout?(volume: string): Promise<string[]>;
  /** Creates the container (not started); returns its id. */
  create(spec: ContainerSpec): Promise<string>;
  /** Starts the container; a frozen one is thawed (its memory limit back, unpaused) instead. */
  start(id: string): Promise<void>;
  /** Stops the container, a frozen one included (thawed first, so it can stop gracefully). */
  stop(id: string, timeoutSeconds?: number): Promise<void>;
  restart(id: string, timeoutSeconds?: number): Promise<void>;
  /**
   * Changes an existing container's restart policy in place, without a restart (decision 0241:
   * gateways made with `on-failure` brought to `no`). A driver without it leaves the policy.
   */
  setRestartPolicy?(id: string, policy: "no" | "on-failure"): Promise<void>;
  /**
   * Freezes a running container and pushes its memory out to the host's swap, keeping about
   * `keepBytes` resident (at most four times that; decision 0178): `start` thaws it. Throws FreezeUnavailableError when
   * the engine cannot (no swap accounting, no swap room), leaving the container running. Drivers
   * without it put an agent to sleep by stopping it.
   */
  freeze?(id: string, keepBytes: number): Promise<void>;
  /**
   * Sets a container's memory, CPU and pids limits in place, without a restart (a pooled gateway
   * adopted by a tenant on a larger plan). Drivers without it (a Swarm service's resources
   * change only with a new task) get no adoption across plans: those tenants provision cold.
   */
  resize?(id: string, limits: ResourceLimits): Promise<void>;
  /**
   * Sets a container's CPU weight (cgroup cpu.shares) in place, running or not: a booting
   * gateway gets more than its plan's while it boots (decision 0250). Drivers without it (a
   * Swarm service changes resources only with a new task) boot at the plan's weight.
   */
  setCpuShares?(id: string, shares: number): Promise<void>;
  /**
   * Pauses a running container's processes so the files on its volume can be copied as of one
   * instant: a copy like a power cut, which SQLite's journal and OpenClaw recover from, not one
   * torn by writes during the copy (decision 0180). Returns the release. A container that is not
   * running, or is already paused (a frozen sleeper), is left as it is; its release does nothing.
   */
  pauseForCopy?(id: string): Promise<() => Promise<void>>;
  /** Removes the container (forcefully); a missing container is not an error. */
  remove(id: string): Promise<void>;
  /** undefined when the container does not exist. */
  inspect(id: string): Promise<ContainerInfo | undefined>;
  stats(id: string): Promise<ContainerStats>;
  logs(id: string, options?: { tail?: number }): Promise<string>;
  exec(id: string, cmd: string[], options?: { timeoutMs?: number }): Promise<ExecResult>;
  /** Containers (running or not) carrying every given label. */
  list(labels: Record<string, string>): Promise<ContainerSummary[]>;
  /** Containers (running or not, any labels) that mount the volume: they keep it from removal. */
  volumeHolders(volume: string): Promise<ContainerSummary[]>;
  /** A one-shot container on the image (volume mounted), removed afterwards. */
  runOnce(spec: {
    image: string;
    volume: string;
    volumeTarget: string;
    /** More volumes (name → mount point), e.g. a snapshot's. */
    extraVolumes?: Record<string, string>;
    /** Run as this user (default: the image's) with these capabilities added (default: none). */
    user?: string;
    capAdd?: string[];
    cmd: string[];
    env?: Record<string, string>;
    entrypoint?: string[];
    labels?: Record<string, string>;
    timeoutMs?: number;
  }): Promise<ExecResult>;
  /**
   * The volume's files as a tar stream, every entry under `state/` (owners and modes kept). The
   * image only hosts a helper that is never started (Docker); the process driver reads the
   * folder. Take it with the gateway stopped or paused (pauseForCopy) for a consistent copy.
   */
  exportVolume(
    volume: string,
    image: string,
    labels?: Record<string, string>,
  ): Promise<NodeJS.ReadableStream>;
  /** Writes a tar stream of the exportVolume shape (entries under `state/`) into the volume. */
  importVolume(
    volume: string,
    image: string,
    tar: NodeJS.ReadableStream,
    labels?: Record<string, string>,
  ): Promise<void>;
  /**
   * The id of the image a reference (tag or id) names now, or undefined when there is none. A
   * rebuilt tag names a new id: instances are pinned to ids, so only an update moves them.
   */
  imageId(image: string): Promise<string | undefined>;
  /**
   * The folder a gateway of `image` serves OpenClaw's Control UI from in place (the image's
   * GATEWAY_IMAGE_LABELS.controlUiRoot), or undefined when the image names none (decision 0187).
   */
  controlUiRoot(image: string): Promise<string | undefined>;
  /** Bytes used by each named volume the engine knows (a periodic, not a per-request, call). */
  volumeSizes(): Promise<Map<string, number>>;
}

/** A node of a multi-node runtime as operators see it. */
export interface RuntimeNode {
  id: string;
  hostname: string;
  role: string;
  /** The scheduler's view: ready, down, unknown, disconnected. */
  state: string;
  /** active, pause, drain (the scheduler's), or draining (ours: taking no new instance). */
  availability: string;
  address: string;
  memoryBytes: number;
  nanoCpus: number;
  reservedMemoryBytes: number;
  reservedNanoCpus: number;
  /** The instances pinned to the node. */
  instances: Array<{ id: string; instanceId: string; running: boolean }>;
}

/**
 * What a runtime spread over several nodes adds: nodes, keeping new instances off a node, and
 * moving an instance's state between nodes (docs/decisions/0167-draining-nodes.md).
 */
export interface ClusterRuntime extends AgentRuntime {
  nodes(): Promise<RuntimeNode[]>;
  /** Marks a node as taking no new instance (true) or taking them again (false). */
  setDraining(nodeId: string, draining: boolean): Promise<void>;
  /** Ends a drain: the node's scheduler availability becomes `drain`. */
  retireNode(nodeId: string): Promise<void>;
  /** The node chosen for an instance with these limits (NoCapacityError when none has room). */
  place(limits: ResourceLimits): Promise<{ id: string }>;
  /** The node an instance's container is pinned to. */
  nodeOf(id: string): Promise<string | undefined>;
  /** The ready node that holds a volume. */
  nodeOfVolume(volume: string): Promise<string | undefined>;
  /** Copies a volume onto another node (the source stays until removeVolumeOn). */
  copyVolume(volume: string, image: string, toNode: string): Promise<void>;
  removeVolumeOn(volume: string, nodeId: string): Promise<void>;
  /** Pins an instance's container to a node (it runs there from its next start). */
  pin(id: string, nodeId: string): Promise<void>;
  /** Copies of state volumes on nodes their instance is no longer pinned to. */
  staleVolumes(): Promise<StaleVolume[]>;
  /** A tar (exportVolume's shape) of the volume's copy on that node. */
  exportVolumeOn(
    volume: string,
    image: string,
    nodeId: string,
    labels?: Record<string, string>,
  ): Promise<NodeJS.ReadableStream>;
}

export interface StaleVolume {
  volume: string;
  /** The node holding the stale copy. */
  nodeId: string;
  instanceId: string;
}

export const isClusterRuntime = (rt: AgentRuntime): rt is ClusterRuntime =>
  "setDraining" in rt && "copyVolume" in rt;

/** Where the platform reaches a container's gateway (host:port), if it can. */
export function gatewayEndpoint(info: ContainerInfo | undefined, port = 18789): string | undefined {
  if (info?.endpoint) return info.endpoint;
  return info?.address ? `${info.address}:${port}` : undefined;
}

/** The engine (Docker socket) does not answer: the lifecycle API maps this to 502. */
export class RuntimeUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "RuntimeUnavailableError";
  }
}

/**
 * No node has room for an instance (free memory and CPU against what is reserved there): the
 * lifecycle API maps this to 503.
 */
export class NoCapacityError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NoCapacityError";
  }
}

/**
 * The engine kept a task of the container's earlier run and will not start it again ("task …:
 * already exists", seen after an engine restart: decision 0239). A new container can start.
 */
export class StaleTaskError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "StaleTaskError";
  }
}

/**
 * The engine will not remove a volume that nothing uses, because it still counts the volume as
 * mounted ("volume has active mounts": Docker before 20.10.25 after a live-restore restart,
 * moby#44422). The engine's next restart clears the count; until then the removal is deferred
 * (decision 0248).
 */
export class VolumeStuckError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "VolumeStuckError";
  }
}

/** The engine cannot freeze a container into swap; the agent sleeps by being stopped instead. */
export class FreezeUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "FreezeUnavailableError";
  }
}

const GB = 1024 ** 3;

/** Memory and CPU per plan (the contract's plan table); unknown and free plans get solo's. */
export const PLAN_LIMITS: Record<string, ResourceLimits> = {
  solo: { memoryBytes: 2 * GB, cpuShares: 1024, cpus: 1, pidsLimit: 512 },
  collective: { memoryBytes: 4 * GB, cpuShares: 2048, cpus: 2, pidsLimit: 1024 },
  label: { memoryBytes: 8 * GB, cpuShares: 4096, cpus: 4, pidsLimit: 2048 },
  network: { memoryBytes: 16 * GB, cpuShares: 8192, cpus: 8, pidsLimit: 4096 },
};

export function limitsForPlan(plan: string | null | undefined): ResourceLimits {
  return PLAN_LIMITS[plan ?? ""] ?? (PLAN_LIMITS.solo as ResourceLimits);
}
