import { runtimeDeployment } from "../agents/engine-health.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { sendJob } from "../platform/jobs.server.ts";

// The nodes of a multi-node runtime for the operator console: the worker records what the
// scheduler says (runtime_nodes), the web reads it, and a drain is a job the web enqueues.
// docs/decisions/0167-draining-nodes.md

export interface NodeRecord {
  id: string;
  hostname: string;
  role: string;
  state: string;
  availability: string;
  address: string;
  memoryBytes: number;
  nanoCpus: number;
  reservedMemoryBytes: number;
  reservedNanoCpus: number;
  instances: Array<{ id: string; instanceId: string; running: boolean }>;
}

interface NodeRow {
  node_id: string;
  hostname: string;
  role: string;
  state: string;
  availability: string;
  address: string;
  memory_bytes: string;
  nano_cpus: string;
  reserved_memory_bytes: string;
  reserved_nano_cpus: string;
  instances: NodeRecord["instances"];
  checked_at: Date;
  drain_status: OperationStatus | null;
  drain_error: string | null;
  drain_changed_at: Date | null;
  recovery_status: OperationStatus | null;
  recovery_summary: string | null;
  recovery_changed_at: Date | null;
}

/** Where an operator's drain or recovery of a node is. */
type OperationStatus = "requested" | "running" | "done" | "failed";

/** Replaces the deployment's node rows with what the scheduler says now (operations kept). */
export async function recordNodes(nodes: NodeRecord[]): Promise<void> {
  const deployment = runtimeDeployment();
  await db().begin(async (tx) => {
    for (const n of nodes) {
      await tx`
        insert into runtime_nodes (deployment, node_id, hostname, role, state, availability,
          address, memory_bytes, nano_cpus, reserved_memory_bytes, reserved_nano_cpus,
          instances, checked_at)
        values (${deployment}, ${n.id}, ${n.hostname}, ${n.role}, ${n.state}, ${n.availability},
          ${n.address}, ${n.memoryBytes}, ${n.nanoCpus}, ${n.reservedMemoryBytes},
          ${n.reservedNanoCpus}, ${tx.json(n.instances)}, now())
        on conflict (deployment, node_id) do update set
          hostname = excluded.hostname, role = excluded.role, state = excluded.state,
          availability = excluded.availability, address = excluded.address,
          memory_bytes = excluded.memory_bytes, nano_cpus = excluded.nano_cpus,
          reserved_memory_bytes = excluded.reserved_memory_bytes,
          reserved_nano_cpus = excluded.reserved_nano_cpus, instances = excluded.instances,
          checked_at = excluded.checked_at`;
    }
    const ids = nodes.map((n) => n.id);
    await tx`delete from runtime_nodes where deployment = ${deployment}
      and not (node_id = any(${ids}::text[]))`;
  });
}

export async function recordDrain(
  nodeId: string,
  status: OperationStatus,
  error?: string,
): Promise<void> {
  await db()`
    update runtime_nodes set drain_status = ${status}, drain_error = ${error ?? null},
      drain_changed_at = now()
    where deployment = ${runtimeDeployment()} and node_id = ${nodeId}`;
}

/** The node's last recovery: its status and what came of each instance (the summary). */
export async function recordRecovery(
  nodeId: string,
  status: OperationStatus,
  summary?: string,
): Promise<void> {
  await db()`
    update runtime_nodes set recovery_status = ${status}, recovery_summary = ${summary ?? null},
      recovery_changed_at = now()
    where deployment = ${runtimeDeployment()} and node_id = ${nodeId}`;
}

const gib = (bytes: number) => Math.round((bytes / 1024 ** 3) * 10) / 10;

/** The console's view: capacity, reserved, instances, health, the last drain and recovery. */
export async function nodesOverview() {
  const [rows, pool] = await Promise.all([
    db()<NodeRow[]>`
      select * from runtime_nodes where deployment = ${runtimeDeployment()}
      order by role, hostname, node_id`,
    db()<{ id: string; node_id: string | null; state: string }[]>`
      select id, node_id, state from gateway_pool`,
  ]);
  // Pooled gateways are shown as the node's warm pool, not as instances (an adopted one is
  // an instance: it has left the pool).
  const pooled = new Set(pool.map((p) => p.id));
  return rows.map((r) => ({
    id: r.node_id,
    hostname: r.hostname,
    role: r.role,
    state: r.state,
    healthy: r.state === "ready",
    availability: r.availability,
    address: r.address,
    memoryGiB: gib(Number(r.memory_bytes)),
    reservedMemoryGiB: gib(Number(r.reserved_memory_bytes)),
    cpus: Number(r.nano_cpus) / 1e9,
    reservedCpus: Number(r.reserved_nano_cpus) / 1e9,
    instances: r.instances.filter((i) => !pooled.has(i.instanceId)),
    running: r.instances.filter((i) => i.running && !pooled.has(i.instanceId)).length,
    warm: pool.filter((p) => p.node_id === r.node_id && p.state === "ready").length,
    checkedAt: r.checked_at.toISOString(),
    drain: r.drain_status
      ? {
          status: r.drain_status,
          error: r.drain_error,
          at: r.drain_changed_at?.toISOString() ?? null,
        }
      : null,
    recovery: r.recovery_status
      ? {
          status: r.recovery_status,
          summary: r.recovery_summary,
          at: r.recovery_changed_at?.toISOString() ?? null,
        }
      : null,
  }));
}

/** Queues a drain of a known node (404 otherwise; 409 while one runs); audited. */
export async function requestDrain(nodeId: string): Promise<void> {
  const [row] = await db()<Pick<NodeRow, "state" | "drain_status">[]>`
    select state, drain_status from runtime_nodes
    where deployment = ${runtimeDeployment()} and node_id = ${nodeId}`;
  if (!row) throw new DomainError(404, "Node not found");
  if (row.drain_status === "requested" || row.drain_status === "running") {
    throw new DomainError(409, "This node is being drained already");
  }
  if (row.state !== "ready") {
    throw new DomainError(409, `This node is ${row.state}: a drain needs it ready to copy from`);
  }
  await db()`
    update runtime_nodes set drain_status = 'requested', drain_error = null,
      drain_changed_at = now()
    where deployment = ${runtimeDeployment()} and node_id = ${nodeId}`;
  await sendJob("drain-node", { nodeId }, { singletonKey: nodeId });
  await recordAudit({ action: "node.drain_requested", target: nodeId, userId: null });
}

/**
 * Queues the re-creation of a node's instances from their latest backups (decision 0167): only
 * for a node that is not ready (404 unknown, 409 ready or holding none); audited.
 */
export async function requestRecovery(nodeId: string): Promise<void> {
  const [row] = await db()<Pick<NodeRow, "state" | "instances" | "recovery_status">[]>`
    select state, instances, recovery_status from runtime_nodes
    where deployment = ${runtimeDeployment()} and node_id = ${nodeId}`;
  if (!row) throw new DomainError(404, "Node not found");
  if (row.recovery_status === "requested" || row.recovery_status === "running") {
    throw new DomainError(409, "This node's instances are being re-created already");
  }
  if (row.state === "ready") {
    throw new DomainError(409, "This node is ready: its instances are where their state is");
  }
  if (row.instances.length === 0) throw new DomainError(409, "This node holds no instance");
  await recordRecovery(nodeId, "requested");
  await sendJob("recover-node", { nodeId }, { singletonKey: nodeId });
  await recordAudit({ action: "node.recovery_requested", target: nodeId, userId: null });
}
