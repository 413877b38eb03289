import { NoCapacityError, type ResourceLimits } from "./types.ts";

// Where a new instance goes on a cluster: by free memory and CPU against what is already
// reserved on each node (not by how many instances it holds). Pure: the Swarm driver gathers
// the figures, this decides (docs/decisions/0145-swarm-driver-and-placement.md).

export interface NodeCapacity {
  id: string;
  hostname: string;
  /** Schedulable: the node is ready and its availability is active (not drained or paused). */
  schedulable: boolean;
  memoryBytes: number;
  nanoCpus: number;
  /** What the services pinned to or running on the node reserve. */
  reservedMemoryBytes: number;
  reservedNanoCpus: number;
}

export interface Demand {
  memoryBytes: number;
  nanoCpus: number;
}

/** The demand an instance reserves: its plan's memory and CPUs (CPUs capped like its limit). */
export function demandOf(limits: ResourceLimits, maxCpus?: number): Demand {
  const cpus = Math.min(limits.cpus, maxCpus ?? limits.cpus);
  return { memoryBytes: limits.memoryBytes, nanoCpus: Math.round(cpus * 1e9) };
}

export const freeMemory = (n: NodeCapacity) => n.memoryBytes - n.reservedMemoryBytes;
export const freeCpus = (n: NodeCapacity) => n.nanoCpus - n.reservedNanoCpus;

export function fits(node: NodeCapacity, demand: Demand): boolean {
  return freeMemory(node) >= demand.memoryBytes && freeCpus(node) >= demand.nanoCpus;
}

/**
 * The node with room that stays the least loaded after the instance lands: the one whose
 * tighter resource (memory or CPU, as a share of the node) keeps the most free. Ties go to the
 * node id, so the choice is deterministic. Throws NoCapacityError when none has room.
 */
export function chooseNode(nodes: NodeCapacity[], demand: Demand): NodeCapacity {
  const score = (n: NodeCapacity) =>
    Math.min(
      (freeMemory(n) - demand.memoryBytes) / n.memoryBytes,
      (freeCpus(n) - demand.nanoCpus) / n.nanoCpus,
    );
  const candidates = nodes
    .filter((n) => n.schedulable && n.memoryBytes > 0 && n.nanoCpus > 0 && fits(n, demand))
    .sort((a, b) => score(b) - score(a) || a.id.localeCompare(b.id));
  const best = candidates[0];
  if (!best) {
    const gib = (b: number) => (b / 1024 ** 3).toFixed(1);
    throw new NoCapacityError(
      `No node has room for an instance needing ${gib(demand.memoryBytes)} GiB and ${
        demand.nanoCpus / 1e9
      } CPUs (${nodes.filter((n) => n.schedulable).length} schedulable nodes)`,
    );
  }
  return best;
}
