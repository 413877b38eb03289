import type Docker from "dockerode";
import { z } from "zod";
import { DockerRuntime } from "./docker.ts";
import { chooseNode, type Demand, demandOf, type NodeCapacity } from "./placement.ts";
import { call, pinnedNode, type Service, type Task, taskRuns } from "./swarm-services.ts";
import type { SwarmStorage } from "./swarm-storage.ts";
import { LABELS, type ResourceLimits, type RuntimeNode, RuntimeUnavailableError } from "./types.ts";

// The Swarm driver's nodes: each one's engine, capacity and placement, the operators' view, drains.

/** The label a node's engine address may be given by (`docker node update --label-add`). */
export const NODE_ENGINE_LABEL = "agent-platform.engine";
/** The node label that keeps new instances off a node being drained (decision 0167). */
export const DRAINING_LABEL = "agent-platform.draining";

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

/** A swarm's nodes through its manager, and each one's engine (its address, or the manager). */
export class SwarmNodes {
  readonly manager: DockerRuntime;
  readonly maxCpus: number | undefined;
  readonly #docker: Docker;
  readonly #nodeEngines: Record<string, string>;
  readonly #engines = new Map<string, DockerRuntime>();
  #managerNodeId: string | undefined;
  #storage: SwarmStorage | undefined;

  constructor(
    manager: DockerRuntime,
    options: {
      nodeEngines?: Record<string, string>;
      maxCpus?: number;
      storage?: SwarmStorage;
    },
  ) {
    this.manager = manager;
    this.#docker = manager.docker;
    this.maxCpus = options.maxCpus;
    this.#nodeEngines = options.nodeEngines ?? {};
    this.#storage = options.storage;
  }

  /** The storage limits each engine is given when first used (swarm-storage.ts, decision 0228). */
  get storage(): SwarmStorage | undefined {
    return this.#storage;
  }

  /** A new storage root: every node's engine is probed for it again when next used. */
  setStorage(storage: SwarmStorage): void {
    this.#storage = storage;
    this.#engines.clear();
  }

  async list(): Promise<SwarmNode[]> {
    return z.array(nodeSchema).parse(await call(() => this.#docker.listNodes()));
  }

  async #managerNode(): Promise<string> {
    this.#managerNodeId ??= (
      (await call(() => this.#docker.info())).Swarm as { NodeID: string }
    ).NodeID;
    return this.#managerNodeId;
  }

  /** The engine of a node: configured by id or hostname, its engine label, or the manager's own. */
  async engineOf(nodeId: string): Promise<DockerRuntime> {
    const cached = this.#engines.get(nodeId);
    if (cached) return cached;
    const node = nodeSchema.parse(await call(() => this.#docker.getNode(nodeId).inspect()));
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

  async readyEngines(): Promise<Array<{ nodeId: string; engine: DockerRuntime }>> {
    const out: Array<{ nodeId: string; engine: DockerRuntime }> = [];
    for (const n of await this.list()) {
      if (n.Status?.State !== "ready") continue;
      try {
        out.push({ nodeId: n.ID, engine: await this.engineOf(n.ID) });
      } catch (error) {
        if (!(error instanceof RuntimeUnavailableError)) throw error;
      }
    }
    return out;
  }

  /** Every node with what it has and what the services pinned to or running on it reserve. */
  async capacity(): Promise<NodeCapacity[]> {
    const [nodes, services, tasks] = await Promise.all([
      this.list(),
      call(() => this.#docker.listServices()) as Promise<Service[]>,
      call(() => this.#docker.listTasks({ filters: { "desired-state": ["running"] } })) as Promise<
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

  demand(limits: ResourceLimits): Demand {
    return demandOf(limits, this.maxCpus);
  }

  /** Chooses the node for a new instance (NoCapacityError when none has room). */
  async place(limits: ResourceLimits): Promise<NodeCapacity> {
    return chooseNode(await this.capacity(), this.demand(limits));
  }

  // --- nodes as operators see them, draining ---------------------------------------------------

  async nodes(): Promise<RuntimeNode[]> {
    const [nodes, capacity, services, tasks] = await Promise.all([
      this.list(),
      this.capacity(),
      call(() =>
        this.#docker.listServices({ filters: { label: [`${LABELS.role}=gateway`] } }),
      ) as Promise<Service[]>,
      call(() => this.#docker.listTasks({ filters: { "desired-state": ["running"] } })) as Promise<
        Task[]
      >,
    ]);
    const running = new Set(
      tasks.filter((t) => taskRuns(t)).map((t) => (t as { ServiceID?: string }).ServiceID),
    );
    const roles = new Map(
      (
        (await call(() => this.#docker.listNodes())) as Array<{
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

  async #update(nodeId: string, change: (spec: Record<string, unknown>) => void): Promise<void> {
    const raw = (await call(() => this.#docker.getNode(nodeId).inspect())) as {
      Version?: { Index?: number };
      Spec?: Record<string, unknown>;
    };
    const spec = structuredClone(raw.Spec ?? {});
    change(spec);
    await call(() =>
      (
        this.#docker.getNode(nodeId) as unknown as {
          update(o: Record<string, unknown>): Promise<unknown>;
        }
      ).update({ version: raw.Version?.Index, ...spec }),
    );
  }

  async setDraining(nodeId: string, draining: boolean): Promise<void> {
    await this.#update(nodeId, (spec) => {
      const labels = { ...((spec.Labels as Record<string, string> | undefined) ?? {}) };
      if (draining) labels[DRAINING_LABEL] = "1";
      else delete labels[DRAINING_LABEL];
      spec.Labels = labels;
      if (!draining) spec.Availability = "active";
    });
  }

  async retireNode(nodeId: string): Promise<void> {
    await this.#update(nodeId, (spec) => {
      spec.Availability = "drain";
    });
  }
}
