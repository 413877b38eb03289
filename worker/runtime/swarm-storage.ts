import type { DockerRuntime } from "./docker.ts";
import { nodeRunner } from "./node-storage.ts";
import { StorageQuota } from "./storage-quota.ts";
import type { StorageEnforcement } from "./types.ts";

// Hard storage limits on a swarm (decision 0228): every node's engine makes a gateway's volume
// as the Docker driver does (a limited btrfs subvolume, decision 0216) when that node's host has
// the prepared root at the same path (STORAGE_ROOT); the btrfs commands run on the node's own
// host (node-storage.ts). Each node is probed once, when the driver first uses its engine, and
// the answer is per node: a node without the root makes unlimited volumes, and the start-up log
// and /ops name it.

export interface SwarmStorageOptions {
  /** The storage root, the same path on every node's host (deploy/host-storage.sh there). */
  root: string;
  /** The nodes' storage agent's image: one every node has, with `sleep` (the gateway's). */
  image: string;
  defaultLimitBytes: number;
  /** Told the summary again after each node's probe (a node that joins later: /ops learns). */
  onProbe?: (state: StorageEnforcement) => void;
}

export type NodeStorage = { node: string } & StorageEnforcement;

/** One line for the log and /ops: enforced only when every node probed enforces. */
export function summarizeNodes(nodes: NodeStorage[]): StorageEnforcement {
  if (nodes.length === 0) return { enforced: false, reason: "no swarm node's storage probed yet" };
  const on = nodes.filter((n) => n.enforced);
  const off = nodes.filter((n) => !n.enforced);
  if (off.length === 0) {
    const roots = [...new Set(on.map((n) => n.mechanism))].join(", ");
    return {
      enforced: true,
      mechanism: `${roots} on every node (${on.map((n) => n.node).join(", ")})`,
    };
  }
  const missing = off.map((n) => `node ${n.node}: ${n.reason}`).join("; ");
  return {
    enforced: false,
    reason: `${missing}${on.length ? `; enforced on ${on.map((n) => n.node).join(", ")}` : ""}`,
  };
}

export class SwarmStorage {
  readonly #options: SwarmStorageOptions;
  readonly #nodes = new Map<string, NodeStorage>();

  constructor(options: SwarmStorageOptions) {
    this.#options = options;
  }

  /** Probes the node's root through its engine and gives the engine the answer. */
  async configure(nodeId: string, name: string, engine: DockerRuntime): Promise<void> {
    const { root, image, defaultLimitBytes } = this.#options;
    const probed = await StorageQuota.probe(root, nodeRunner(engine, image));
    engine.configureStorage("quota" in probed ? { ...probed, defaultLimitBytes } : probed);
    this.#nodes.set(nodeId, { node: name, ...engine.storageEnforcement() });
    this.#options.onProbe?.(this.enforcement());
  }

  /** Per node, as probed. */
  nodes(): NodeStorage[] {
    return [...this.#nodes.values()];
  }

  enforcement(): StorageEnforcement {
    return summarizeNodes(this.nodes());
  }
}
