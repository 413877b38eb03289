import type Docker from "dockerode";
import { DEFAULT_TENANT_SUBNETS, DockerRuntime } from "./docker.ts";
import { type SubnetPool, subnetPool } from "./docker-networks.ts";
import { fits, type NodeCapacity } from "./placement.ts";
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
import { SwarmNodes } from "./swarm-nodes.ts";
import { gatewayServiceSpec } from "./swarm-service-spec.ts";
import { call, newNetworkRetried, pinnedNode, SwarmServices, statusOf } from "./swarm-services.ts";
import { SwarmStorage, type SwarmStorageOptions } from "./swarm-storage.ts";
import { SwarmVolumes } from "./swarm-volumes.ts";
import {
  type AgentRuntime,
  type ClusterRuntime,
  type ContainerInfo,
  type ContainerSpec,
  type ContainerStats,
  type ContainerSummary,
  type ExecResult,
  LABELS,
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

// Split by concern: services and tasks (swarm-services.ts), nodes, their engines and draining
// (swarm-nodes.ts), volumes and storage limits (swarm-volumes.ts, swarm-storage.ts), the
// service spec (swarm-service-spec.ts), overlays (swarm-networks.ts); this class composes them.

export { DRAINING_LABEL, NODE_ENGINE_LABEL } from "./swarm-nodes.ts";
export { pinnedNode } from "./swarm-services.ts";

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
  /**
   * How long a gateway's boot may take (GATEWAY_HEALTH_TIMEOUT_MS): its health check's start
   * period, so the swarm does not replace a slow boot the platform still waits for (decision 0252).
   */
  bootBoundMs?: number;
}

export class SwarmRuntime implements ClusterRuntime {
  readonly driver = "swarm" as const;
  readonly manager: DockerRuntime;
  readonly maxCpus: number | undefined;
  readonly #settleMs: number;
  readonly #anchor: AnchorSpec | undefined;
  readonly #tenantSubnets: SubnetPool;
  readonly #platformHost: string | undefined;
  readonly #bootBoundMs: number | undefined;
  readonly #nodes: SwarmNodes;
  readonly #services: SwarmServices;
  readonly #volumes: SwarmVolumes;

  constructor(options: SwarmDriverOptions = {}) {
    this.manager = new DockerRuntime({ host: options.host });
    this.maxCpus = options.maxCpus;
    this.#settleMs = options.settleMs ?? 60_000;
    this.#anchor = options.anchor;
    this.#platformHost = options.platformHost;
    this.#bootBoundMs = options.bootBoundMs;
    this.#nodes = new SwarmNodes(this.manager, {
      nodeEngines: options.nodeEngines,
      maxCpus: options.maxCpus,
      storage: options.storage ? new SwarmStorage(options.storage) : undefined,
    });
    this.#services = new SwarmServices(this.docker, this.#settleMs, (nodeId) =>
      this.engineOf(nodeId),
    );
    this.#volumes = new SwarmVolumes(this.#nodes, this.#services);
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

  // --- nodes and their engines (swarm-nodes.ts) ----------------------------------------------

  engineOf(nodeId: string): Promise<DockerRuntime> {
    return this.#nodes.engineOf(nodeId);
  }

  capacity(): Promise<NodeCapacity[]> {
    return this.#nodes.capacity();
  }

  place(limits: ResourceLimits): Promise<NodeCapacity> {
    return this.#nodes.place(limits);
  }

  nodes(): Promise<RuntimeNode[]> {
    return this.#nodes.nodes();
  }

  setDraining(nodeId: string, draining: boolean): Promise<void> {
    return this.#nodes.setDraining(nodeId, draining);
  }

  retireNode(nodeId: string): Promise<void> {
    return this.#nodes.retireNode(nodeId);
  }

  // --- storage limits (swarm-volumes.ts, decision 0228) --------------------------------------

  configureStorage(storage: SwarmStorageOptions): Promise<StorageEnforcement> {
    return this.#volumes.configureStorage(storage);
  }

  storageEnforcement(): StorageEnforcement {
    return this.#volumes.storageEnforcement();
  }

  setStorageLimit(volume: string, limitBytes: number): Promise<boolean> {
    return this.#volumes.setStorageLimit(volume, limitBytes);
  }

  /** On the node that holds the volume, through its storage agent (decision 0235). */
  async repairVolumeLayout(volume: string): Promise<string[]> {
    const nodeId = await this.#volumes.nodeOf(volume);
    return nodeId ? (await this.engineOf(nodeId)).repairVolumeLayout(volume) : [];
  }

  restoreStorageCounts(): Promise<string[]> {
    return this.#volumes.restoreStorageCounts();
  }

  storageUsage(): Promise<Map<string, VolumeUsage>> {
    return this.#volumes.storageUsage();
  }

  // --- volumes (swarm-volumes.ts) ------------------------------------------------------------

  staleVolumes(): Promise<StaleVolume[]> {
    return this.#volumes.stale();
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

  nodeOfVolume(volume: string): Promise<string | undefined> {
    return this.#volumes.nodeOf(volume);
  }

  async nodeOf(id: string): Promise<string | undefined> {
    return pinnedNode((await this.#services.get(id))?.Spec);
  }

  copyVolume(volume: string, image: string, toNode: string): Promise<void> {
    return this.#volumes.copy(volume, image, toNode);
  }

  removeVolumeOn(volume: string, nodeId: string): Promise<void> {
    return this.#volumes.removeOn(volume, nodeId);
  }

  async pin(id: string, nodeId: string): Promise<void> {
    await this.#services.update(id, (s) => {
      const tt = s.TaskTemplate ?? {};
      const others = (tt.Placement?.Constraints ?? []).filter((c) => !/^node\.id\s*==/.test(c));
      tt.Placement = { ...tt.Placement, Constraints: [...others, `node.id==${nodeId}`] };
      s.TaskTemplate = tt;
    });
  }

  ensureVolume(name: string, labels: Record<string, string>, placement?: Placement): Promise<void> {
    return this.#volumes.ensure(name, labels, placement);
  }

  volumeExists(name: string): Promise<boolean> {
    return this.#volumes.exists(name);
  }

  removeVolume(name: string): Promise<void> {
    return this.#volumes.remove(name);
  }

  volumeSizes(): Promise<Map<string, number>> {
    return this.#volumes.sizes();
  }

  volumeHolders(volume: string): Promise<ContainerSummary[]> {
    return this.#volumes.holders(volume);
  }

  /** The volume's tar, read on the node that holds it. */
  async exportVolume(
    volume: string,
    image: string,
    labels?: Record<string, string>,
  ): Promise<NodeJS.ReadableStream> {
    return (await this.#volumes.engineOf(volume)).exportVolume(volume, image, labels);
  }

  /** Writes into the volume on the node that holds it (ensureVolume placed it). */
  async importVolume(
    volume: string,
    image: string,
    tar: NodeJS.ReadableStream,
    labels?: Record<string, string>,
  ): Promise<void> {
    return (await this.#volumes.engineOf(volume)).importVolume(volume, image, tar, labels);
  }

  /** A one-shot container on the node that holds the volume (its state lives there). */
  async runOnce(spec: Parameters<AgentRuntime["runOnce"]>[0]): Promise<ExecResult> {
    const nodeId = await this.#volumes.nodeOf(spec.volume);
    const engine = nodeId ? await this.engineOf(nodeId) : this.manager;
    return engine.runOnce(spec);
  }

  async imageId(image: string): Promise<string | undefined> {
    return this.manager.imageId(image);
  }

  async controlUiRoot(image: string): Promise<string | undefined> {
    return this.manager.controlUiRoot(image);
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
    const subnet = await newNetworkRetried(() => splitSubnet(this.docker, network));
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
    const before = this.#services.current(await this.#services.tasks(id));
    const hosts = await this.#platformHosts(to);
    const service = await this.#services.update(id, (s) => {
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
      await this.#services.settle(service.ID, "running", old);
    }
  }

  async #engineClients(): Promise<Docker[]> {
    return (await this.#nodes.readyEngines()).map((e) => e.engine.docker);
  }

  // --- services ------------------------------------------------------------------------------

  async create(spec: ContainerSpec): Promise<string> {
    // The instance's state volume decides its node; a volume not made yet is placed now.
    let nodeId = await this.#volumes.nodeOf(spec.volume);
    if (!nodeId) {
      await this.ensureVolume(spec.volume, { [LABELS.instanceId]: spec.instanceId }, spec);
      nodeId = await this.#volumes.nodeOf(spec.volume);
    }
    if (!nodeId) throw new Error(`volume ${spec.volume} vanished after create`);
    // On a limited volume, as the Docker driver: root read-only, /tmp the volume's own, SQLite's
    // temporary files in the state (decisions 0216, 0224).
    const limited = await (await this.engineOf(nodeId)).volumes.isLimited(spec.volume);
    const env = limited ? { ...spec.env, SQLITE_TMPDIR: `${spec.volumeTarget}/tmp` } : spec.env;
    const demand = this.#nodes.demand(spec.limits);
    const node = (await this.capacity()).find((n) => n.id === nodeId);
    if (!node?.schedulable || !fits(node, demand)) {
      throw new NoCapacityError(
        `Node ${node?.hostname || nodeId} holding this instance's state has no room for it now`,
      );
    }
    const hosts = await this.#platformHosts(spec.network);
    const created = (await newNetworkRetried(() =>
      this.docker.createService(
        gatewayServiceSpec(spec, {
          nodeId,
          env,
          demand,
          limited,
          hosts,
          bootBoundMs: this.#bootBoundMs,
        }),
      ),
    )) as { id?: string; ID?: string };
    return (created.ID ?? created.id) as string;
  }

  async start(id: string): Promise<void> {
    const service = await this.#services.get(id);
    if (!service) throw new Error(`no such service: ${id}`);
    if (service.Spec?.Mode?.Replicated?.Replicas !== 1) {
      await this.#services.update(id, (s) => {
        s.Mode = { Replicated: { Replicas: 1 } };
      });
    }
    await this.#services.settle(service.ID, "running");
    // A task container paused for a copy (pauseForCopy) whose release never came runs again.
    const found = await this.#services.container(service.ID);
    if (found && (await found.engine.inspect(found.containerId))?.state === "paused") {
      await found.engine.start(found.containerId);
    }
  }

  async stop(id: string, _timeoutSeconds = 10): Promise<void> {
    const service = await this.#services.get(id);
    if (!service) throw new Error(`no such service: ${id}`);
    if (service.Spec?.Mode?.Replicated?.Replicas !== 0) {
      await this.#services.update(id, (s) => {
        s.Mode = { Replicated: { Replicas: 0 } };
      });
    }
    await this.#services.settle(service.ID, "stopped");
  }

  async restart(id: string, _timeoutSeconds = 10): Promise<void> {
    const before = this.#services.current(await this.#services.tasks(id));
    const service = await this.#services.update(id, (s) => {
      s.Mode = { Replicated: { Replicas: 1 } };
      const tt = s.TaskTemplate ?? {};
      tt.ForceUpdate = (tt.ForceUpdate ?? 0) + 1; // a new task, as `docker service update --force`
      s.TaskTemplate = tt;
    });
    await this.#services.settle(
      service.ID,
      "running",
      before?.DesiredState === "running" ? before.ID : undefined,
    );
  }

  async remove(id: string): Promise<void> {
    const service = await this.#services.get(id);
    if (!service) {
      // A plain container on some node (a one-shot left behind, see volumeHolders).
      for (const { engine } of await this.#nodes.readyEngines()) await engine.remove(id);
      return;
    }
    const nodes = new Set(
      (await this.#services.tasks(service.ID)).map((t) => t.NodeID).filter((n): n is string => !!n),
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

  inspect(id: string): Promise<ContainerInfo | undefined> {
    return this.#services.inspect(id);
  }

  async pauseForCopy(id: string): Promise<() => Promise<void>> {
    const found = await this.#services.container(id);
    if (!found) return async () => {};
    return found.engine.pauseForCopy(found.containerId);
  }

  async stats(id: string): Promise<ContainerStats> {
    const { engine, containerId } = await this.#services.taskContainer(id);
    return engine.stats(containerId);
  }

  async logs(id: string, options: { tail?: number } = {}): Promise<string> {
    const { engine, containerId } = await this.#services.taskContainer(id);
    return engine.logs(containerId, options);
  }

  async exec(id: string, cmd: string[], options: { timeoutMs?: number } = {}): Promise<ExecResult> {
    const { engine, containerId } = await this.#services.taskContainer(id);
    return engine.exec(containerId, cmd, options);
  }

  list(labels: Record<string, string>): Promise<ContainerSummary[]> {
    return this.#services.list(labels);
  }
}
