import type Docker from "dockerode";
import type { DockerRuntime } from "./docker.ts";
import { chooseNode } from "./placement.ts";
import type { VolumeUsage } from "./storage-quota.ts";
import type { SwarmNodes } from "./swarm-nodes.ts";
import { call, pinnedNode, type Service, type SwarmServices } from "./swarm-services.ts";
import { SwarmStorage, type SwarmStorageOptions } from "./swarm-storage.ts";
import {
  type ContainerSummary,
  LABELS,
  limitsForPlan,
  type Placement,
  type StaleVolume,
  type StorageEnforcement,
} from "./types.ts";

// The Swarm driver's volumes: the node holding each, their storage limits, stale copies, copies.

/** A swarm's volumes, each on the node whose engine holds it. */
export class SwarmVolumes {
  readonly #docker: Docker;
  readonly #nodes: SwarmNodes;
  readonly #services: SwarmServices;

  constructor(nodes: SwarmNodes, services: SwarmServices) {
    this.#docker = nodes.manager.docker;
    this.#nodes = nodes;
    this.#services = services;
  }

  // --- storage limits (decision 0228) --------------------------------------------------------

  /**
   * Sets the storage root and probes every ready node's host for it (the worker at start);
   * a node that joins later is probed when first used.
   */
  async configureStorage(storage: SwarmStorageOptions): Promise<StorageEnforcement> {
    this.#nodes.setStorage(new SwarmStorage(storage));
    await this.#nodes.readyEngines();
    return this.storageEnforcement();
  }

  storageEnforcement(): StorageEnforcement {
    return (
      this.#nodes.storage?.enforcement() ?? {
        enforced: false,
        reason: "STORAGE_ROOT is not set (deploy/host-storage.sh prepares one on each node)",
      }
    );
  }

  async setStorageLimit(volume: string, limitBytes: number): Promise<boolean> {
    const nodeId = await this.nodeOf(volume);
    if (!nodeId) return false;
    return (await this.#nodes.engineOf(nodeId)).setStorageLimit(volume, limitBytes);
  }

  async restoreStorageCounts(): Promise<string[]> {
    const restored: string[] = [];
    for (const { nodeId, engine } of await this.#nodes.readyEngines()) {
      for (const root of await engine.restoreStorageCounts()) restored.push(`${root} on ${nodeId}`);
    }
    return restored;
  }

  async storageUsage(): Promise<Map<string, VolumeUsage>> {
    const usage = new Map<string, VolumeUsage>();
    for (const { engine } of await this.#nodes.readyEngines()) {
      for (const [volume, used] of await engine.storageUsage()) usage.set(volume, used);
    }
    return usage;
  }

  // --- where a volume is ---------------------------------------------------------------------

  /**
   * The node whose engine holds the volume, if any. When several do (a node that came back
   * after its instance was re-created elsewhere), the one the service mounting it is pinned to.
   */
  async nodeOf(name: string): Promise<string | undefined> {
    const holders: string[] = [];
    for (const { nodeId, engine } of await this.#nodes.readyEngines()) {
      if (await engine.volumeExists(name)) holders.push(nodeId);
    }
    if (holders.length < 2) return holders[0];
    const pinned = (await this.#services.mounting(name)).map((s) => pinnedNode(s.Spec));
    return holders.find((id) => pinned.includes(id)) ?? holders[0];
  }

  async engineOf(volume: string): Promise<DockerRuntime> {
    const nodeId = await this.nodeOf(volume);
    if (!nodeId) throw new Error(`volume ${volume} is on no ready node`);
    return this.#nodes.engineOf(nodeId);
  }

  /**
   * Copies of a state volume left on a ready node while the service mounting it is pinned to
   * another ready node that holds it too: what a node that was down still has after its
   * instances were re-created elsewhere (decision 0167).
   */
  async stale(): Promise<StaleVolume[]> {
    const engines = await this.#nodes.readyEngines();
    const held = new Map<string, string[]>(); // volume → ready nodes holding it
    for (const { nodeId, engine } of engines) {
      const { Volumes } = await engine.docker.listVolumes({
        filters: { label: [LABELS.instanceId] },
      });
      for (const v of Volumes ?? []) held.set(v.Name, [...(held.get(v.Name) ?? []), nodeId]);
    }
    const services = (await call(() => this.#docker.listServices())) as Service[];
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

  async copy(volume: string, image: string, toNode: string): Promise<void> {
    const from = await this.nodeOf(volume);
    if (!from) throw new Error(`volume ${volume} is on no ready node`);
    if (from === toNode) return;
    const source = await this.#nodes.engineOf(from);
    const target = await this.#nodes.engineOf(toNode);
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

  async removeOn(volume: string, nodeId: string): Promise<void> {
    const engine = await this.#nodes.engineOf(nodeId);
    // Ended tasks of a service that now runs elsewhere still hold the volume on this node.
    for (const c of await engine.volumeHolders(volume)) {
      if (c.state === "running") {
        throw new Error(`volume ${volume} is in use on node ${nodeId} by ${c.name || c.id}`);
      }
      if (c.labels["com.docker.swarm.service.id"]) await engine.remove(c.id);
    }
    await engine.removeVolume(volume);
  }

  // --- volumes -------------------------------------------------------------------------------

  /**
   * A new volume goes where its instance will run: next to another volume of the same instance
   * (a snapshot beside its state), else on the node chosen by capacity for `placement`'s limits
   * (solo's when not said).
   */
  async ensure(name: string, labels: Record<string, string>, placement?: Placement): Promise<void> {
    if (await this.nodeOf(name)) return;
    let nodeId: string | undefined;
    const instanceId = labels[LABELS.instanceId];
    if (instanceId) {
      for (const { nodeId: id, engine } of await this.#nodes.readyEngines()) {
        const { Volumes } = await engine.docker.listVolumes({
          filters: { label: [`${LABELS.instanceId}=${instanceId}`] },
        });
        if ((Volumes ?? []).length > 0) nodeId = id;
      }
    }
    const limits = placement?.limits ?? limitsForPlan(undefined);
    if (!nodeId && placement?.node) {
      // The caller's node, if it is schedulable and has room (chooseNode among it alone).
      const node = (await this.#nodes.capacity()).filter((n) => n.id === placement.node);
      nodeId = chooseNode(node, this.#nodes.demand(limits)).id;
    }
    nodeId ??= (await this.#nodes.place(limits)).id;
    await (await this.#nodes.engineOf(nodeId)).ensureVolume(name, labels, placement);
  }

  async exists(name: string): Promise<boolean> {
    return (await this.nodeOf(name)) !== undefined;
  }

  async remove(name: string): Promise<void> {
    for (const { engine } of await this.#nodes.readyEngines()) await engine.removeVolume(name);
  }

  async sizes(): Promise<Map<string, number>> {
    const sizes = new Map<string, number>();
    for (const { engine } of await this.#nodes.readyEngines()) {
      for (const [k, v] of await engine.volumeSizes()) sizes.set(k, v);
    }
    return sizes;
  }

  /**
   * What keeps a volume from removal: the services mounting it, and plain containers (not a
   * service's task) on the nodes that mount it. `remove` takes either id.
   */
  async holders(volume: string): Promise<ContainerSummary[]> {
    const holders: ContainerSummary[] = (await this.#services.mounting(volume)).map((s) => ({
      id: s.ID,
      name: s.Spec?.Name ?? "",
      state: "service",
      labels: s.Spec?.Labels ?? {},
    }));
    for (const { engine } of await this.#nodes.readyEngines()) {
      for (const c of await engine.volumeHolders(volume)) {
        if (!c.labels["com.docker.swarm.service.id"]) holders.push(c);
      }
    }
    return holders;
  }
}
