import type Docker from "dockerode";
import { z } from "zod";
import { DEFAULT_TENANT_SUBNETS, DockerRuntime } from "./docker.ts";
import { type SubnetPool, subnetPool } from "./docker-networks.ts";
import { tmpVolumeOf } from "./docker-volumes.ts";
import { chooseNode, type Demand, demandOf, fits, type NodeCapacity } from "./placement.ts";
import type { VolumeUsage } from "./storage-quota.ts";
import {
  type AnchorSpec,
  attachPlatform,
  ensureOverlay,
  listOverlays,
  networkNames,
  OVERLAY_PREFIX,
  platformContainers,
  platformHostEntries,
  removeOverlay,
  splitSubnet,
} from "./swarm-networks.ts";
import { SwarmStorage, type SwarmStorageOptions } from "./swarm-storage.ts";
import {
  type AgentRuntime,
  type ClusterRuntime,
  type ContainerInfo,
  type ContainerSpec,
  type ContainerState,
  type ContainerStats,
  type ContainerSummary,
  type ExecResult,
  LABELS,
  limitsForPlan,
  NoCapacityError,
  type Placement,
  type ResourceLimits,
  type RuntimeNode,
  RuntimeUnavailableError,
  type StaleVolume,
  type StorageEnforcement,
} from "./types.ts";

// The Swarm driver: one replicated service (0 or 1 replica) per instance, pinned by a placement
// constraint to the node that holds its state volume. The swarm's manager API places, starts and
// stops; what only a node's own engine can do (volumes, a task's container: inspect, stats,
// logs, exec, one-shot containers) goes to that node's engine. Hardening as the Docker driver:
// Init, every capability dropped, no-new-privileges, a pids limit, the plan's memory and CPUs as
// reservations and limits, the image's non-root user. docs/decisions/0145-swarm-driver-and-placement.md

/** The label a node's engine address may be given by (`docker node update --label-add`). */
export const NODE_ENGINE_LABEL = "agent-platform.engine";
/** The node label that keeps new instances off a node being drained (decision 0167). */
export const DRAINING_LABEL = "agent-platform.draining";

export interface SwarmDriverOptions {
  /** The manager's engine (default: DOCKER_SOCKET or /var/run/docker.sock). */
  host?: string;
  /** Node id or hostname → that node's engine (unix:///path or tcp://host:port). */
  nodeEngines?: Record<string, string>;
  /** Upper bound on a gateway's CPUs. */
  maxCpus?: number;
  /** How long start/stop/restart wait for the task to get there. */
  settleMs?: number;
  /**
   * The image and shared overlay of each node's network anchor (swarm-networks.ts), which lets
   * the platform's service containers join gateways' overlays made on other nodes.
   */
  anchor?: AnchorSpec;
  /** The range gateways' overlays are cut from (RUNTIME_TENANT_SUBNETS), a /26 each. */
  tenantSubnets?: string;
  /** Each gateway on an overlay of its own (decision 0201). */
  isolateGateways?: boolean;
  /**
   * The name gateways call the platform by (RUNTIME_PLATFORM_AI_URL's host, `web`): with
   * isolateGateways, the platform containers of that alias hold the host address of every
   * gateway's overlay, and each gateway's hosts file names it so (swarm-networks.ts).
   */
  platformHost?: string;
  /** Hard storage limits on every node that has the prepared root (decision 0228). */
  storage?: SwarmStorageOptions;
}

type Task = Docker.Task & {
  ID: string;
  NodeID?: string;
  DesiredState?: string;
  CreatedAt?: string;
  Status?: {
    State?: string;
    Err?: string;
    Message?: string;
    ContainerStatus?: { ContainerID?: string; ExitCode?: number };
  };
  NetworksAttachments?: Array<{ Network?: { Spec?: { Name?: string } }; Addresses?: string[] }>;
};

type Service = {
  ID: string;
  /** Present once the service was updated (started): a never-started one is "created". */
  PreviousSpec?: ServiceSpec;
  Version?: { Index?: number };
  CreatedAt?: string;
  Spec?: ServiceSpec;
};

type ServiceSpec = {
  Name?: string;
  Labels?: Record<string, string>;
  Mode?: { Replicated?: { Replicas?: number } };
  TaskTemplate?: {
    ContainerSpec?: {
      Image?: string;
      Hostname?: string;
      Env?: string[];
      Init?: boolean;
      CapabilityDrop?: string[];
      Privileges?: { NoNewPrivileges?: boolean };
      User?: string;
      ReadOnly?: boolean;
      Mounts?: Array<{ Type?: string; Source?: string; Target?: string }>;
      Hosts?: string[];
    };
    Resources?: {
      Limits?: { NanoCPUs?: number; MemoryBytes?: number; Pids?: number };
      Reservations?: { NanoCPUs?: number; MemoryBytes?: number };
    };
    RestartPolicy?: { Condition?: string };
    Placement?: { Constraints?: string[] };
    ForceUpdate?: number;
    Networks?: Array<{ Target?: string; Aliases?: string[] }>;
  };
};

/** What the driver reads of a node (GET /nodes): parsed, not cast. */
const nodeSchema = z.object({
  ID: z.string(),
  Spec: z
    .object({
      Availability: z.string().optional(),
      Labels: z.record(z.string(), z.string()).nullish(),
    })
    .optional(),
  Description: z
    .object({
      Hostname: z.string().optional(),
      Resources: z
        .object({ NanoCPUs: z.number().optional(), MemoryBytes: z.number().optional() })
        .optional(),
    })
    .optional(),
  Status: z.object({ State: z.string().optional(), Addr: z.string().optional() }).optional(),
  Version: z.object({ Index: z.number().optional() }).optional(),
});
type SwarmNode = z.infer<typeof nodeSchema>;

const LIVE_TASK = new Set(["new", "pending", "assigned", "accepted", "preparing", "starting"]);
const ENGINE_DOWN = new Set(["ECONNREFUSED", "ENOENT", "EACCES", "ECONNRESET", "EPIPE"]);

/**
 * The task's container runs: `running`, or `starting` with a container (a task whose image has
 * a HEALTHCHECK stays `starting` until it passes; the gateway's start period is 120 s).
 */
const taskRuns = (t: Task | undefined) =>
  t?.Status?.State === "running" ||
  (t?.Status?.State === "starting" && !!t.Status.ContainerStatus?.ContainerID);

const statusOf = (error: unknown) => (error as { statusCode?: number }).statusCode;

async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code && ENGINE_DOWN.has(code)) {
      throw new RuntimeUnavailableError(`Swarm manager unreachable (${code})`, { cause: error });
    }
    throw error;
  }
}

const newest = (a: { CreatedAt?: string }, b: { CreatedAt?: string }) =>
  (b.CreatedAt ?? "").localeCompare(a.CreatedAt ?? "");

/** The node id a service is pinned to (its `node.id==…` constraint). */
export function pinnedNode(spec: ServiceSpec | undefined): string | undefined {
  for (const c of spec?.TaskTemplate?.Placement?.Constraints ?? []) {
    const m = /^node\.id\s*==\s*(\S+)$/.exec(c);
    if (m) return m[1];
  }
  return undefined;
}

export class SwarmRuntime implements ClusterRuntime {
  readonly driver = "swarm" as const;
  readonly manager: DockerRuntime;
  readonly maxCpus: number | undefined;
  readonly #nodeEngines: Record<string, string>;
  readonly #engines = new Map<string, DockerRuntime>();
  readonly #settleMs: number;
  readonly #anchor: AnchorSpec | undefined;
  readonly #tenantSubnets: SubnetPool;
  readonly #platformHost: string | undefined;
  #managerNodeId: string | undefined;
  readonly #networkNames = new Map<string, string>();
  #storage: SwarmStorage | undefined;

  constructor(options: SwarmDriverOptions = {}) {
    this.manager = new DockerRuntime({ host: options.host });
    this.maxCpus = options.maxCpus;
    this.#nodeEngines = options.nodeEngines ?? {};
    this.#settleMs = options.settleMs ?? 60_000;
    this.#anchor = options.anchor;
    this.#platformHost = options.platformHost;
    if (options.storage) this.#storage = new SwarmStorage(options.storage);
    if (options.isolateGateways) {
      this.ensureIsolatedNetwork = (name, labels) => this.#ensureIsolatedNetwork(name, labels);
    }
    this.#tenantSubnets = subnetPool(
      options.tenantSubnets ?? DEFAULT_TENANT_SUBNETS,
      OVERLAY_PREFIX,
    );
  }

  get docker(): Docker {
    return this.manager.docker;
  }

  async ping(): Promise<void> {
    const info = await call(() => this.docker.info());
    const swarm = info.Swarm as { LocalNodeState?: string; ControlAvailable?: boolean };
    if (swarm?.LocalNodeState !== "active" || !swarm.ControlAvailable) {
      throw new RuntimeUnavailableError(
        "the engine is not a Swarm manager (docker swarm init, or point DOCKER_SOCKET at a manager)",
      );
    }
  }

  // --- nodes and their engines ---------------------------------------------------------------

  async #nodes(): Promise<SwarmNode[]> {
    return z.array(nodeSchema).parse(await call(() => this.docker.listNodes()));
  }

  async #managerNode(): Promise<string> {
    this.#managerNodeId ??= (
      (await call(() => this.docker.info())).Swarm as { NodeID: string }
    ).NodeID;
    return this.#managerNodeId;
  }

  /** The engine of a node: configured by id or hostname, its engine label, or the manager's own. */
  async engineOf(nodeId: string): Promise<DockerRuntime> {
    const cached = this.#engines.get(nodeId);
    if (cached) return cached;
    const node = nodeSchema.parse(await call(() => this.docker.getNode(nodeId).inspect()));
    const host =
      this.#nodeEngines[nodeId] ??
      (node.Description?.Hostname ? this.#nodeEngines[node.Description.Hostname] : undefined) ??
      node.Spec?.Labels?.[NODE_ENGINE_LABEL];
    let engine: DockerRuntime;
    if (host) engine = new DockerRuntime({ host });
    else if (nodeId === (await this.#managerNode())) engine = this.manager;
    else {
      throw new RuntimeUnavailableError(
        `no engine address for node ${nodeId} (SWARM_NODE_ENGINES or node label ${NODE_ENGINE_LABEL})`,
      );
    }
    // Its volumes limited when its host has the storage root (probed once, decision 0228).
    await this.#storage?.configure(nodeId, node.Description?.Hostname || nodeId, engine);
    this.#engines.set(nodeId, engine);
    return engine;
  }

  // --- storage limits (decision 0228) --------------------------------------------------------

  /**
   * Sets the storage root and probes every ready node's host for it (the worker at start);
   * a node that joins later is probed when first used.
   */
  async configureStorage(storage: SwarmStorageOptions): Promise<StorageEnforcement> {
    this.#storage = new SwarmStorage(storage);
    this.#engines.clear();
    await this.#readyEngines();
    return this.storageEnforcement();
  }

  storageEnforcement(): StorageEnforcement {
    return (
      this.#storage?.enforcement() ?? {
        enforced: false,
        reason: "STORAGE_ROOT is not set (deploy/host-storage.sh prepares one on each node)",
      }
    );
  }

  async setStorageLimit(volume: string, limitBytes: number): Promise<boolean> {
    const nodeId = await this.#nodeOfVolume(volume);
    if (!nodeId) return false;
    return (await this.engineOf(nodeId)).setStorageLimit(volume, limitBytes);
  }

  /** On the node that holds the volume, through its storage agent (decision 0235). */
  async repairVolumeLayout(volume: string): Promise<string[]> {
    const nodeId = await this.#nodeOfVolume(volume);
    return nodeId ? (await this.engineOf(nodeId)).repairVolumeLayout(volume) : [];
  }

  async storageUsage(): Promise<Map<string, VolumeUsage>> {
    const usage = new Map<string, VolumeUsage>();
    for (const { engine } of await this.#readyEngines()) {
      for (const [volume, used] of await engine.storageUsage()) usage.set(volume, used);
    }
    return usage;
  }

  async #readyEngines(): Promise<Array<{ nodeId: string; engine: DockerRuntime }>> {
    const out: Array<{ nodeId: string; engine: DockerRuntime }> = [];
    for (const n of await this.#nodes()) {
      if (n.Status?.State !== "ready") continue;
      try {
        out.push({ nodeId: n.ID, engine: await this.engineOf(n.ID) });
      } catch (error) {
        if (!(error instanceof RuntimeUnavailableError)) throw error;
      }
    }
    return out;
  }

  /**
   * The node whose engine holds the volume, if any. When several do (a node that came back
   * after its instance was re-created elsewhere), the one the service mounting it is pinned to.
   */
  async #nodeOfVolume(name: string): Promise<string | undefined> {
    const holders: string[] = [];
    for (const { nodeId, engine } of await this.#readyEngines()) {
      if (await engine.volumeExists(name)) holders.push(nodeId);
    }
    if (holders.length < 2) return holders[0];
    const pinned = (await this.#servicesMounting(name)).map((s) => pinnedNode(s.Spec));
    return holders.find((id) => pinned.includes(id)) ?? holders[0];
  }

  async #servicesMounting(volume: string): Promise<Service[]> {
    const services = (await call(() => this.docker.listServices())) as Service[];
    return services.filter((s) =>
      (s.Spec?.TaskTemplate?.ContainerSpec?.Mounts ?? []).some((m) => m.Source === volume),
    );
  }

  /**
   * Copies of a state volume left on a ready node while the service mounting it is pinned to
   * another ready node that holds it too: what a node that was down still has after its
   * instances were re-created elsewhere (decision 0167).
   */
  async staleVolumes(): Promise<StaleVolume[]> {
    const engines = await this.#readyEngines();
    const held = new Map<string, string[]>(); // volume → ready nodes holding it
    for (const { nodeId, engine } of engines) {
      const { Volumes } = await engine.docker.listVolumes({
        filters: { label: [LABELS.instanceId] },
      });
      for (const v of Volumes ?? []) held.set(v.Name, [...(held.get(v.Name) ?? []), nodeId]);
    }
    const services = (await call(() => this.docker.listServices())) as Service[];
    const stale: StaleVolume[] = [];
    for (const s of services) {
      const pinned = pinnedNode(s.Spec);
      const instanceId = s.Spec?.Labels?.[LABELS.instanceId];
      if (!pinned || !instanceId) continue;
      for (const m of s.Spec?.TaskTemplate?.ContainerSpec?.Mounts ?? []) {
        const nodes = m.Source ? (held.get(m.Source) ?? []) : [];
        if (!nodes.includes(pinned)) continue; // the live copy is not reachable: keep every copy
        for (const nodeId of nodes) {
          if (nodeId !== pinned) stale.push({ volume: m.Source as string, nodeId, instanceId });
        }
      }
    }
    return stale;
  }

  /** A tar of the volume's copy on one node (exportVolume reads the live copy). */
  async exportVolumeOn(
    volume: string,
    image: string,
    nodeId: string,
    labels?: Record<string, string>,
  ): Promise<NodeJS.ReadableStream> {
    return (await this.engineOf(nodeId)).exportVolume(volume, image, labels);
  }

  /** Every node with what it has and what the services pinned to or running on it reserve. */
  async capacity(): Promise<NodeCapacity[]> {
    const [nodes, services, tasks] = await Promise.all([
      this.#nodes(),
      call(() => this.docker.listServices()) as Promise<Service[]>,
      call(() => this.docker.listTasks({ filters: { "desired-state": ["running"] } })) as Promise<
        Task[]
      >,
    ]);
    const byId = new Map(services.map((s) => [s.ID, s]));
    const reserved = new Map<string, { mem: number; cpu: number }>();
    const counted = new Set<string>();
    const add = (nodeId: string, s: Service) => {
      const key = `${nodeId}/${s.ID}`;
      if (counted.has(key)) return;
      counted.add(key);
      const r = s.Spec?.TaskTemplate?.Resources?.Reservations;
      const cur = reserved.get(nodeId) ?? { mem: 0, cpu: 0 };
      reserved.set(nodeId, {
        mem: cur.mem + (r?.MemoryBytes ?? 0),
        cpu: cur.cpu + (r?.NanoCPUs ?? 0),
      });
    };
    // A pinned instance keeps its reservation while stopped: its start must never find the
    // node full.
    for (const s of services) {
      const node = pinnedNode(s.Spec);
      if (node) add(node, s);
    }
    for (const t of tasks) {
      const s = byId.get((t as { ServiceID?: string }).ServiceID ?? "");
      if (t.NodeID && s) add(t.NodeID, s);
    }
    return nodes.map((n) => {
      const r = reserved.get(n.ID) ?? { mem: 0, cpu: 0 };
      return {
        id: n.ID,
        hostname: n.Description?.Hostname ?? "",
        schedulable:
          n.Status?.State === "ready" &&
          n.Spec?.Availability === "active" &&
          n.Spec?.Labels?.[DRAINING_LABEL] !== "1",
        memoryBytes: n.Description?.Resources?.MemoryBytes ?? 0,
        nanoCpus: n.Description?.Resources?.NanoCPUs ?? 0,
        reservedMemoryBytes: r.mem,
        reservedNanoCpus: r.cpu,
      };
    });
  }

  #demand(limits: ResourceLimits): Demand {
    return demandOf(limits, this.maxCpus);
  }

  /** Chooses the node for a new instance (NoCapacityError when none has room). */
  async place(limits: ResourceLimits): Promise<NodeCapacity> {
    return chooseNode(await this.capacity(), this.#demand(limits));
  }

  // --- nodes as operators see them, draining ---------------------------------------------------

  async nodes(): Promise<RuntimeNode[]> {
    const [nodes, capacity, services, tasks] = await Promise.all([
      this.#nodes(),
      this.capacity(),
      call(() =>
        this.docker.listServices({ filters: { label: [`${LABELS.role}=gateway`] } }),
      ) as Promise<Service[]>,
      call(() => this.docker.listTasks({ filters: { "desired-state": ["running"] } })) as Promise<
        Task[]
      >,
    ]);
    const running = new Set(
      tasks.filter((t) => taskRuns(t)).map((t) => (t as { ServiceID?: string }).ServiceID),
    );
    const roles = new Map(
      (
        (await call(() => this.docker.listNodes())) as Array<{
          ID: string;
          Spec?: { Role?: string };
        }>
      ).map((n) => [n.ID, n.Spec?.Role ?? ""]),
    );
    return nodes.map((n) => {
      const cap = capacity.find((c) => c.id === n.ID);
      const draining = n.Spec?.Labels?.[DRAINING_LABEL] === "1";
      return {
        id: n.ID,
        hostname: n.Description?.Hostname ?? "",
        role: roles.get(n.ID) ?? "",
        state: n.Status?.State ?? "unknown",
        availability:
          draining && n.Spec?.Availability === "active" ? "draining" : (n.Spec?.Availability ?? ""),
        address: n.Status?.Addr ?? "",
        memoryBytes: cap?.memoryBytes ?? 0,
        nanoCpus: cap?.nanoCpus ?? 0,
        reservedMemoryBytes: cap?.reservedMemoryBytes ?? 0,
        reservedNanoCpus: cap?.reservedNanoCpus ?? 0,
        instances: services
          .filter((s) => pinnedNode(s.Spec) === n.ID)
          .map((s) => ({
            id: s.ID,
            instanceId: s.Spec?.Labels?.[LABELS.instanceId] ?? "",
            running: running.has(s.ID),
          }))
          .sort((a, b) => a.instanceId.localeCompare(b.instanceId)),
      };
    });
  }

  async #updateNode(
    nodeId: string,
    change: (spec: Record<string, unknown>) => void,
  ): Promise<void> {
    const raw = (await call(() => this.docker.getNode(nodeId).inspect())) as {
      Version?: { Index?: number };
      Spec?: Record<string, unknown>;
    };
    const spec = structuredClone(raw.Spec ?? {});
    change(spec);
    await call(() =>
      (
        this.docker.getNode(nodeId) as unknown as {
          update(o: Record<string, unknown>): Promise<unknown>;
        }
      ).update({ version: raw.Version?.Index, ...spec }),
    );
  }

  async setDraining(nodeId: string, draining: boolean): Promise<void> {
    await this.#updateNode(nodeId, (spec) => {
      const labels = { ...((spec.Labels as Record<string, string> | undefined) ?? {}) };
      if (draining) labels[DRAINING_LABEL] = "1";
      else delete labels[DRAINING_LABEL];
      spec.Labels = labels;
      if (!draining) spec.Availability = "active";
    });
  }

  async retireNode(nodeId: string): Promise<void> {
    await this.#updateNode(nodeId, (spec) => {
      spec.Availability = "drain";
    });
  }

  async nodeOfVolume(volume: string): Promise<string | undefined> {
    return this.#nodeOfVolume(volume);
  }

  async nodeOf(id: string): Promise<string | undefined> {
    return pinnedNode((await this.#service(id))?.Spec);
  }

  async copyVolume(volume: string, image: string, toNode: string): Promise<void> {
    const from = await this.#nodeOfVolume(volume);
    if (!from) throw new Error(`volume ${volume} is on no ready node`);
    if (from === toNode) return;
    const source = await this.engineOf(from);
    const target = await this.engineOf(toNode);
    const { Labels } = (await call(() => source.docker.getVolume(volume).inspect())) as {
      Labels?: Record<string, string> | null;
    };
    // At the source's limit, where both nodes limit (decision 0228).
    const limit = (await source.storageUsage()).get(volume)?.limitBytes;
    await target.ensureVolume(volume, Labels ?? {}, {
      limits: limitsForPlan(undefined),
      storageLimitBytes: limit,
    });
    try {
      await target.importVolume(volume, image, await source.exportVolume(volume, image));
    } catch (error) {
      await target.removeVolume(volume).catch(() => {});
      throw error;
    }
  }

  async removeVolumeOn(volume: string, nodeId: string): Promise<void> {
    const engine = await this.engineOf(nodeId);
    // Ended tasks of a service that now runs elsewhere still hold the volume on this node.
    for (const c of await engine.volumeHolders(volume)) {
      if (c.state === "running") {
        throw new Error(`volume ${volume} is in use on node ${nodeId} by ${c.name || c.id}`);
      }
      if (c.labels["com.docker.swarm.service.id"]) await engine.remove(c.id);
    }
    await engine.removeVolume(volume);
  }

  async pin(id: string, nodeId: string): Promise<void> {
    await this.#update(id, (s) => {
      const tt = s.TaskTemplate ?? {};
      const others = (tt.Placement?.Constraints ?? []).filter((c) => !/^node\.id\s*==/.test(c));
      tt.Placement = { ...tt.Placement, Constraints: [...others, `node.id==${nodeId}`] };
      s.TaskTemplate = tt;
    });
  }

  // --- networks (swarm-networks.ts, decision 0201) ------------------------------------------

  /**
   * The shared overlay, attachable so the platform's own containers join it. Its gateway
   * address is no host of ours: gateways reach the platform by RUNTIME_PLATFORM_AI_URL (a name
   * the platform's containers take on every gateway's overlay), so none is returned.
   */
  async ensureNetwork(
    name: string,
    labels: Record<string, string> = {},
  ): Promise<{ gatewayIp: string | undefined }> {
    await ensureOverlay(this.docker, call, name, labels);
    return { gatewayIp: undefined };
  }

  /**
   * A gateway's own overlay, with the platform's running containers connected to it. Present
   * only with `isolateGateways` (decision 0201).
   */
  readonly ensureIsolatedNetwork?: (name: string, labels: Record<string, string>) => Promise<void>;

  async #ensureIsolatedNetwork(name: string, labels: Record<string, string>): Promise<void> {
    await ensureOverlay(this.docker, call, name, labels, this.#tenantSubnets);
    await attachPlatform(await this.#engineClients(), [name], this.#anchor, this.#platformHost);
  }

  /**
   * The hosts-file entries of a gateway on `network`: the platform's name at its host address
   * there, when the network is a gateway's own overlay (none on the shared one, where Docker's
   * DNS answers for the service). Written into the service before its task starts: a gateway on
   * another node than the web's resolves its name by it (decision 0201).
   */
  async #platformHosts(network: string): Promise<string[]> {
    if (!this.#platformHost || !this.ensureIsolatedNetwork) return [];
    const subnet = await this.#newNetworkRetried(() => splitSubnet(this.docker, network));
    return subnet ? platformHostEntries(subnet, this.#platformHost) : [];
  }

  async removeNetwork(name: string): Promise<void> {
    await removeOverlay(this.docker, call, await this.#engineClients(), name, this.#settleMs);
  }

  async listNetworks(
    labels: Record<string, string>,
  ): Promise<Array<{ name: string; createdAt: string }>> {
    return listOverlays(this.docker, call, labels);
  }

  /** Connects platform containers started since (a new web replica) to the labelled overlays. */
  async attachPlatform(labels: Record<string, string>): Promise<number> {
    const overlays = (await this.listNetworks(labels)).map((n) => n.name);
    if (overlays.length === 0) return 0;
    return attachPlatform(await this.#engineClients(), overlays, this.#anchor, this.#platformHost);
  }

  /** The running platform containers on the ready nodes (a node that does not answer: none). */
  async platformContainers(): Promise<string[]> {
    const ids: string[] = [];
    for (const engine of await this.#engineClients()) {
      for (const c of await platformContainers(engine).catch(() => [])) ids.push(c.id);
    }
    return ids;
  }

  /**
   * Puts the service on `to` instead of `from`. A service's networks change only with a new
   * task: a running gateway restarts (on its node, with its volume), and is waited for.
   */
  async moveToNetwork(id: string, from: string, to: string): Promise<void> {
    const names = await networkNames(this.docker, call);
    const before = this.#current(await this.#tasks(id));
    const hosts = await this.#platformHosts(to);
    const service = await this.#update(id, (s) => {
      const tt = s.TaskTemplate ?? {};
      // The platform's name on the new overlay (none on the shared one: DNS answers there).
      tt.ContainerSpec = { ...tt.ContainerSpec, Hosts: hosts };
      const hostname = s.TaskTemplate?.ContainerSpec?.Hostname;
      const kept = (tt.Networks ?? []).filter((n) => {
        const name = names.get(n.Target ?? "") ?? n.Target;
        return name !== from && name !== to;
      });
      // First: the address reported is the one on the first network.
      tt.Networks = [{ Target: to, Aliases: hostname ? [hostname] : [] }, ...kept];
      s.TaskTemplate = tt;
    });
    if (service.Spec?.Mode?.Replicated?.Replicas === 1) {
      const old = before?.DesiredState === "running" ? before.ID : undefined;
      await this.#settle(service.ID, "running", old);
    }
  }

  async #engineClients(): Promise<Docker[]> {
    return (await this.#readyEngines()).map((e) => e.engine.docker);
  }

  // --- volumes -------------------------------------------------------------------------------

  /**
   * A new volume goes where its instance will run: next to another volume of the same instance
   * (a snapshot beside its state), else on the node chosen by capacity for `placement`'s limits
   * (solo's when not said).
   */
  async ensureVolume(
    name: string,
    labels: Record<string, string>,
    placement?: Placement,
  ): Promise<void> {
    if (await this.#nodeOfVolume(name)) return;
    let nodeId: string | undefined;
    const instanceId = labels[LABELS.instanceId];
    if (instanceId) {
      for (const { nodeId: id, engine } of await this.#readyEngines()) {
        const { Volumes } = await engine.docker.listVolumes({
          filters: { label: [`${LABELS.instanceId}=${instanceId}`] },
        });
        if ((Volumes ?? []).length > 0) nodeId = id;
      }
    }
    const limits = placement?.limits ?? limitsForPlan(undefined);
    if (!nodeId && placement?.node) {
      // The caller's node, if it is schedulable and has room (chooseNode among it alone).
      const node = (await this.capacity()).filter((n) => n.id === placement.node);
      nodeId = chooseNode(node, this.#demand(limits)).id;
    }
    nodeId ??= (await this.place(limits)).id;
    await (await this.engineOf(nodeId)).ensureVolume(name, labels, placement);
  }

  async volumeExists(name: string): Promise<boolean> {
    return (await this.#nodeOfVolume(name)) !== undefined;
  }

  async removeVolume(name: string): Promise<void> {
    for (const { engine } of await this.#readyEngines()) await engine.removeVolume(name);
  }

  async volumeSizes(): Promise<Map<string, number>> {
    const sizes = new Map<string, number>();
    for (const { engine } of await this.#readyEngines()) {
      for (const [k, v] of await engine.volumeSizes()) sizes.set(k, v);
    }
    return sizes;
  }

  async imageId(image: string): Promise<string | undefined> {
    return this.manager.imageId(image);
  }

  async controlUiRoot(image: string): Promise<string | undefined> {
    return this.manager.controlUiRoot(image);
  }

  // --- services ------------------------------------------------------------------------------

  async create(spec: ContainerSpec): Promise<string> {
    // The instance's state volume decides its node; a volume not made yet is placed now.
    let nodeId = await this.#nodeOfVolume(spec.volume);
    if (!nodeId) {
      await this.ensureVolume(spec.volume, { [LABELS.instanceId]: spec.instanceId }, spec);
      nodeId = await this.#nodeOfVolume(spec.volume);
    }
    if (!nodeId) throw new Error(`volume ${spec.volume} vanished after create`);
    // On a limited volume, as the Docker driver: root read-only, /tmp the volume's own, SQLite's
    // temporary files in the state (decisions 0216, 0224).
    const limited = await (await this.engineOf(nodeId)).volumes.isLimited(spec.volume);
    const env = limited ? { ...spec.env, SQLITE_TMPDIR: `${spec.volumeTarget}/tmp` } : spec.env;
    const demand = this.#demand(spec.limits);
    const node = (await this.capacity()).find((n) => n.id === nodeId);
    if (!node?.schedulable || !fits(node, demand)) {
      throw new NoCapacityError(
        `Node ${node?.hostname || nodeId} holding this instance's state has no room for it now`,
      );
    }
    const labels = {
      ...spec.labels,
      [LABELS.managed]: "1",
      [LABELS.instanceId]: spec.instanceId,
      [LABELS.userId]: spec.userId,
      [LABELS.role]: "gateway",
    };
    const hosts = await this.#platformHosts(spec.network);
    const created = (await this.#newNetworkRetried(() =>
      this.docker.createService({
        Name: spec.name,
        Labels: labels,
        Mode: { Replicated: { Replicas: 0 } },
        TaskTemplate: {
          ContainerSpec: {
            Image: spec.image,
            Hostname: spec.hostname,
            Args: spec.cmd,
            Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
            Labels: labels,
            Init: true,
            CapabilityDrop: ["ALL"],
            // Honoured from API 1.46; older engines need dockerd --no-new-privileges (decision).
            Privileges: { NoNewPrivileges: true },
            StopGracePeriod: 10e9,
            ReadOnly: limited,
            Mounts: [
              { Type: "volume", Source: spec.volume, Target: spec.volumeTarget },
              ...(limited
                ? [{ Type: "volume", Source: tmpVolumeOf(spec.volume), Target: "/tmp" }]
                : []),
            ],
            ...(hosts.length ? { Hosts: hosts } : {}),
          },
          Resources: {
            Limits: {
              NanoCPUs: demand.nanoCpus,
              MemoryBytes: demand.memoryBytes,
              Pids: spec.limits.pidsLimit,
            },
            Reservations: { NanoCPUs: demand.nanoCpus, MemoryBytes: demand.memoryBytes },
          },
          RestartPolicy: {
            Condition: spec.restartPolicy === "no" ? "none" : "on-failure",
            Delay: 1e9,
          },
          Placement: { Constraints: [`node.id==${nodeId}`] },
          Networks: [{ Target: spec.network, Aliases: [spec.hostname] }],
          LogDriver: { Name: "json-file", Options: { "max-size": "10m", "max-file": "3" } },
        },
        // One replica, one address: the task's own (no virtual IP in front of it).
        EndpointSpec: { Mode: "dnsrr" },
      } as unknown as Docker.CreateServiceOptions),
    )) as { id?: string; ID?: string };
    return (created.ID ?? created.id) as string;
  }

  /**
   * Runs a call naming a network made a moment ago (a gateway's own overlay): the manager
   * answers 404 "no such network" for a moment after creating one (more than ten seconds on a
   * loaded manager: seen in npm test), retried for a minute.
   */
  async #newNetworkRetried<T>(fn: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + 60_000;
    for (let delay = 100; ; delay = Math.min(delay * 2, 1_000)) {
      try {
        return await call(fn);
      } catch (error) {
        const missing =
          statusOf(error) === 404 &&
          /no such network|network \S+ not found/i.test((error as Error).message);
        if (!missing || Date.now() > deadline) throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }

  async #service(id: string): Promise<Service | undefined> {
    try {
      return (await call(() => this.docker.getService(id).inspect())) as Service;
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }

  async #tasks(serviceId: string): Promise<Task[]> {
    const tasks = (await call(() =>
      this.docker.listTasks({ filters: { service: [serviceId] } }),
    )) as Task[];
    return tasks.sort(newest);
  }

  /** The task that counts now: the newest one meant to run, else the newest of all. */
  #current(tasks: Task[]): Task | undefined {
    return tasks.find((t) => t.DesiredState === "running") ?? tasks[0];
  }

  async #update(id: string, change: (spec: ServiceSpec) => void): Promise<Service> {
    const service = await this.#service(id);
    if (!service?.Spec) throw new Error(`no such service: ${id}`);
    const spec = structuredClone(service.Spec);
    change(spec);
    await call(() =>
      this.docker.getService(service.ID).update({ version: service.Version?.Index, ...spec }),
    );
    return service;
  }

  /** Waits until the service's current task runs (or, for `stopped`, none runs). */
  async #settle(serviceId: string, want: "running" | "stopped", after?: string): Promise<void> {
    const deadline = Date.now() + this.#settleMs;
    let delay = 100;
    for (;;) {
      const tasks = await this.#tasks(serviceId);
      if (want === "stopped") {
        const live = tasks.filter(
          (t) => t.Status?.State === "running" || LIVE_TASK.has(t.Status?.State ?? ""),
        );
        if (live.length === 0) return;
      } else {
        const t = tasks.find((x) => x.DesiredState === "running" && (!after || x.ID !== after));
        const state = t?.Status?.State;
        // Its container runs: what a start waits for, as with the Docker driver; health is
        // waited on by the caller.
        if (taskRuns(t)) return;
        if (t && state === "pending" && /insufficient resources/i.test(t.Status?.Err ?? "")) {
          throw new NoCapacityError(`No room on the instance's node: ${t.Status?.Err}`);
        }
        if (t && (state === "rejected" || state === "failed")) {
          throw new Error(`task ${state}: ${t.Status?.Err ?? t.Status?.Message ?? "unknown"}`);
        }
      }
      if (Date.now() > deadline) {
        throw new Error(`service ${serviceId} not ${want} after ${this.#settleMs} ms`);
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 500);
    }
  }

  async start(id: string): Promise<void> {
    const service = await this.#service(id);
    if (!service) throw new Error(`no such service: ${id}`);
    if (service.Spec?.Mode?.Replicated?.Replicas !== 1) {
      await this.#update(id, (s) => {
        s.Mode = { Replicated: { Replicas: 1 } };
      });
    }
    await this.#settle(service.ID, "running");
    // A task container paused for a copy (pauseForCopy) whose release never came runs again.
    const found = await this.#container(service.ID);
    if (found && (await found.engine.inspect(found.containerId))?.state === "paused") {
      await found.engine.start(found.containerId);
    }
  }

  async stop(id: string, _timeoutSeconds = 10): Promise<void> {
    const service = await this.#service(id);
    if (!service) throw new Error(`no such service: ${id}`);
    if (service.Spec?.Mode?.Replicated?.Replicas !== 0) {
      await this.#update(id, (s) => {
        s.Mode = { Replicated: { Replicas: 0 } };
      });
    }
    await this.#settle(service.ID, "stopped");
  }

  async restart(id: string, _timeoutSeconds = 10): Promise<void> {
    const before = this.#current(await this.#tasks(id));
    const service = await this.#update(id, (s) => {
      s.Mode = { Replicated: { Replicas: 1 } };
      const tt = s.TaskTemplate ?? {};
      tt.ForceUpdate = (tt.ForceUpdate ?? 0) + 1; // a new task, as `docker service update --force`
      s.TaskTemplate = tt;
    });
    await this.#settle(
      service.ID,
      "running",
      before?.DesiredState === "running" ? before.ID : undefined,
    );
  }

  async remove(id: string): Promise<void> {
    const service = await this.#service(id);
    if (!service) {
      // A plain container on some node (a one-shot left behind, see volumeHolders).
      for (const { engine } of await this.#readyEngines()) await engine.remove(id);
      return;
    }
    const nodes = new Set(
      (await this.#tasks(service.ID)).map((t) => t.NodeID).filter((n): n is string => !!n),
    );
    try {
      await call(() => this.docker.getService(service.ID).remove());
    } catch (error) {
      if (statusOf(error) !== 404) throw error;
    }
    // The tasks' containers go asynchronously; the volume can only be removed once they have.
    const deadline = Date.now() + this.#settleMs;
    for (const nodeId of nodes) {
      const engine = await this.engineOf(nodeId).catch(() => undefined);
      if (!engine) continue;
      const filters = { label: [`com.docker.swarm.service.id=${service.ID}`] };
      // A node that is down keeps its containers until it comes back; nothing to wait for.
      const left = () =>
        engine.docker.listContainers({ all: true, filters }).then(
          (c) => c.length,
          () => 0,
        );
      while ((await left()) > 0) {
        if (Date.now() > deadline) break;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  /** The service's current task's container on its node, when it has one. */
  async #container(
    id: string,
  ): Promise<{ engine: DockerRuntime; containerId: string; task: Task } | undefined> {
    const tasks = await this.#tasks(id);
    for (const task of [this.#current(tasks), ...tasks]) {
      const containerId = task?.Status?.ContainerStatus?.ContainerID;
      if (task?.NodeID && containerId) {
        return { engine: await this.engineOf(task.NodeID), containerId, task };
      }
    }
    return undefined;
  }

  async #taskContainer(id: string) {
    const found = await this.#container(id);
    if (!found) throw new Error(`service ${id} has no container`);
    return found;
  }

  async inspect(id: string): Promise<ContainerInfo | undefined> {
    const service = await this.#service(id);
    if (!service?.Spec) return undefined;
    const spec = service.Spec;
    const cs = spec.TaskTemplate?.ContainerSpec ?? {};
    const limits = spec.TaskTemplate?.Resources?.Limits ?? {};
    const tasks = await this.#tasks(service.ID);
    const task = this.#current(tasks);
    const replicas = spec.Mode?.Replicated?.Replicas ?? 0;
    let running = replicas > 0 && taskRuns(task);
    let state: ContainerState;
    if (running) state = "running";
    else if (replicas > 0) state = "restarting";
    // Scaled to 0 the swarm drops the tasks: a service that was ever updated has been started.
    else state = tasks.length === 0 && !service.PreviousSpec ? "created" : "exited";
    const targets = (spec.TaskTemplate?.Networks ?? []).map((n) => n.Target ?? "");
    const network = targets[0];
    const attachment = (task?.NetworksAttachments ?? []).find(
      (a) =>
        a.Network?.Spec?.Name === network ||
        (a as { Network?: { ID?: string } }).Network?.ID === network,
    );
    const networks = await this.#networkNamesOf(targets, task);
    const address = running ? attachment?.Addresses?.[0]?.split("/")[0] : undefined;
    const found = await this.#container(service.ID).catch(() => undefined);
    const container = found ? await found.engine.inspect(found.containerId) : undefined;
    // The task runs but its container is paused (pauseForCopy): it cannot serve.
    if (running && container?.state === "paused") {
      running = false;
      state = "paused";
    }
    const image = (cs.Image ?? "").replace(/@sha256:[0-9a-f]+$/, "");
    const nodeId = pinnedNode(spec);
    return {
      id: service.ID,
      name: spec.Name ?? "",
      image,
      imageId:
        container?.imageId ??
        (nodeId ? await (await this.engineOf(nodeId)).imageId(image) : undefined) ??
        "",
      state,
      running,
      health: running ? container?.health : undefined,
      oomKilled: container?.oomKilled ?? false,
      exitCode: task?.Status?.ContainerStatus?.ExitCode ?? container?.exitCode ?? 0,
      restartCount: Math.max(0, tasks.length - 1),
      startedAt: running ? container?.startedAt : undefined,
      finishedAt: container?.finishedAt,
      labels: spec.Labels ?? {},
      address,
      networks,
      node: nodeId,
      ports: {},
      hostname: cs.Hostname ?? "",
      limits: {
        memoryBytes: limits.MemoryBytes ?? 0,
        cpuShares: container?.limits.cpuShares ?? 0,
        nanoCpus: limits.NanoCPUs ?? 0,
        pidsLimit: limits.Pids ?? 0,
      },
      security: {
        init: cs.Init === true,
        capDrop: cs.CapabilityDrop ?? [],
        securityOpt: cs.Privileges?.NoNewPrivileges ? ["no-new-privileges"] : [],
        readOnly: cs.ReadOnly === true,
      },
      restartPolicy: spec.TaskTemplate?.RestartPolicy?.Condition ?? "",
      env: cs.Env ?? [],
      mounts: (cs.Mounts ?? []).map((m) => ({
        name: m.Source,
        destination: m.Target ?? "",
        type: m.Type ?? "volume",
      })),
    };
  }

  /** The names of a spec's networks (it holds ids): from the task's attachments, else looked up. */
  async #networkNamesOf(targets: string[], task: Task | undefined): Promise<string[]> {
    // A network's id names it for good: remembered (inspect runs every few seconds).
    const known = this.#networkNames;
    for (const a of task?.NetworksAttachments ?? []) {
      const { ID, Spec } = (a.Network ?? {}) as { ID?: string; Spec?: { Name?: string } };
      if (ID && Spec?.Name) known.set(ID, Spec.Name);
    }
    if (targets.some((t) => !known.has(t))) {
      for (const [id, name] of await networkNames(this.docker, call)) known.set(id, name);
    }
    return targets.map((t) => known.get(t) ?? t);
  }

  async pauseForCopy(id: string): Promise<() => Promise<void>> {
    const found = await this.#container(id);
    if (!found) return async () => {};
    return found.engine.pauseForCopy(found.containerId);
  }

  async stats(id: string): Promise<ContainerStats> {
    const { engine, containerId } = await this.#taskContainer(id);
    return engine.stats(containerId);
  }

  async logs(id: string, options: { tail?: number } = {}): Promise<string> {
    const { engine, containerId } = await this.#taskContainer(id);
    return engine.logs(containerId, options);
  }

  async exec(id: string, cmd: string[], options: { timeoutMs?: number } = {}): Promise<ExecResult> {
    const { engine, containerId } = await this.#taskContainer(id);
    return engine.exec(containerId, cmd, options);
  }

  async list(labels: Record<string, string>): Promise<ContainerSummary[]> {
    const filters = { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) };
    const services = (await call(() => this.docker.listServices({ filters }))) as Service[];
    if (services.length === 0) return [];
    const running = new Set(
      (
        (await call(() =>
          this.docker.listTasks({ filters: { "desired-state": ["running"] } }),
        )) as Task[]
      )
        .filter((t) => taskRuns(t))
        .map((t) => (t as { ServiceID?: string }).ServiceID),
    );
    return services.map((s) => ({
      id: s.ID,
      name: s.Spec?.Name ?? "",
      state: running.has(s.ID) ? "running" : "exited",
      labels: s.Spec?.Labels ?? {},
    }));
  }

  /**
   * What keeps a volume from removal: the services mounting it, and plain containers (not a
   * service's task) on the nodes that mount it. `remove` takes either id.
   */
  async volumeHolders(volume: string): Promise<ContainerSummary[]> {
    const holders: ContainerSummary[] = (await this.#servicesMounting(volume)).map((s) => ({
      id: s.ID,
      name: s.Spec?.Name ?? "",
      state: "service",
      labels: s.Spec?.Labels ?? {},
    }));
    for (const { engine } of await this.#readyEngines()) {
      for (const c of await engine.volumeHolders(volume)) {
        if (!c.labels["com.docker.swarm.service.id"]) holders.push(c);
      }
    }
    return holders;
  }

  /** The volume's tar, read on the node that holds it. */
  async exportVolume(
    volume: string,
    image: string,
    labels?: Record<string, string>,
  ): Promise<NodeJS.ReadableStream> {
    return (await this.#engineOfVolume(volume)).exportVolume(volume, image, labels);
  }

  /** Writes into the volume on the node that holds it (ensureVolume placed it). */
  async importVolume(
    volume: string,
    image: string,
    tar: NodeJS.ReadableStream,
    labels?: Record<string, string>,
  ): Promise<void> {
    return (await this.#engineOfVolume(volume)).importVolume(volume, image, tar, labels);
  }

  async #engineOfVolume(volume: string): Promise<DockerRuntime> {
    const nodeId = await this.#nodeOfVolume(volume);
    if (!nodeId) throw new Error(`volume ${volume} is on no ready node`);
    return this.engineOf(nodeId);
  }

  /** A one-shot container on the node that holds the volume (its state lives there). */
  async runOnce(spec: Parameters<AgentRuntime["runOnce"]>[0]): Promise<ExecResult> {
    const nodeId = await this.#nodeOfVolume(spec.volume);
    const engine = nodeId ? await this.engineOf(nodeId) : this.manager;
    return engine.runOnce(spec);
  }
}
