import { describe, expect, it } from "vitest";
import * as opsNodes from "../../app/routes/ops.nodes.tsx";
import { type NodeRecord, recordNodes } from "../../app/server/ops/nodes.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { getBoss } from "../../app/server/platform/jobs.server.ts";
import { recoverySummary } from "../../worker/instances/nodes.ts";
import { newUser, type TestUser } from "../accounts/helpers.ts";
import { getPage, postPage } from "./support.ts";

// Nodes in the operator console: what the worker recorded of the swarm's nodes (capacity,
// reserved, instances, health), and a drain button that queues the drain job; operators only,
// audited. The drain itself runs against a real swarm in test/runtime/swarm-cluster.test.ts.

const GiB = 1024 ** 3;
const makeOperator = (u: TestUser) => db()`update users set is_operator = true where id = ${u.id}`;

const node = (id: string, extra: Partial<NodeRecord> = {}): NodeRecord => ({
  id,
  hostname: `host-${id}`,
  role: "worker",
  state: "ready",
  availability: "active",
  address: "192.0.2.10",
  memoryBytes: 16 * GiB,
  nanoCpus: 8e9,
  reservedMemoryBytes: 4 * GiB,
  reservedNanoCpus: 2e9,
  instances: [
    { id: "svc1", instanceId: "ins_a", running: true },
    { id: "svc2", instanceId: "ins_b", running: false },
  ],
  ...extra,
});

describe("nodes in the operator console", () => {
  it("shows operators the nodes; a drain is queued once, audited; 403 for others, 404 and 409 where due", async () => {
    const operator = await newUser();
    await makeOperator(operator);
    const user = await newUser();
    // nodeA also runs a warm pooled gateway: the node's warm pool, not one of its instances.
    const a = node("nodeA", { role: "manager" });
    a.instances.push({ id: "svc3", instanceId: "gwp_warm", running: true });
    await recordNodes([a, node("nodeB", { instances: [] }), node("nodeC", { state: "down" })]);
    await db()`insert into gateway_pool (id, container_name, volume_name, image,
        gateway_token_sealed, state, container_id, node_id, ready_at)
      values ('gwp_warm', 'agent-gwp_warm', 'agent-gwp_warm-state', 'agent-gateway:test',
        'sealed', 'ready', 'svc3', 'nodeA', now())`;

    expect((await getPage(opsNodes.loader, "/ops/nodes", user.cookie)).status).toBe(403);
    const denied = await postPage(
      opsNodes.action,
      "/ops/nodes",
      { intent: "drain", nodeId: "nodeA" },
      user.cookie,
    );
    expect(denied.status).toBe(403);

    const page = await getPage(opsNodes.loader, "/ops/nodes", operator.cookie);
    expect(page.status).toBe(200);
    const { nodes } = page.body as { nodes: Array<Record<string, unknown>> };
    expect(nodes.map((n) => n.id)).toEqual(["nodeA", "nodeB", "nodeC"]);
    expect(nodes[0]).toMatchObject({
      role: "manager",
      healthy: true,
      memoryGiB: 16,
      reservedMemoryGiB: 4,
      cpus: 8,
      reservedCpus: 2,
      running: 1,
      warm: 1,
      drain: null,
    });
    expect(nodes[0]?.instances).toEqual([
      expect.objectContaining({ id: "svc1" }),
      expect.objectContaining({ id: "svc2" }),
    ]);
    expect(nodes[1]).toMatchObject({ warm: 0 });
    expect(nodes[2]).toMatchObject({ state: "down", healthy: false });

    const drained = await postPage(
      opsNodes.action,
      "/ops/nodes",
      { intent: "drain", nodeId: "nodeA" },
      operator.cookie,
    );
    expect(drained.status).toBe(303);
    expect(drained.location).toMatch(/^\/ops\/nodes\?notice=/);
    const jobs = await (await getBoss()).findJobs("drain-node", { data: { nodeId: "nodeA" } });
    expect(jobs).toHaveLength(1);
    const again = await postPage(
      opsNodes.action,
      "/ops/nodes",
      { intent: "drain", nodeId: "nodeA" },
      operator.cookie,
    );
    expect(again.status).toBe(409);
    const missing = await postPage(
      opsNodes.action,
      "/ops/nodes",
      { intent: "drain", nodeId: "nodeZ" },
      operator.cookie,
    );
    expect(missing.status).toBe(404);
    const down = await postPage(
      opsNodes.action,
      "/ops/nodes",
      { intent: "drain", nodeId: "nodeC" },
      operator.cookie,
    );
    expect(down.status).toBe(409);
    const after = await getPage(opsNodes.loader, "/ops/nodes", operator.cookie);
    expect((after.body as { nodes: Array<{ drain: unknown }> }).nodes[0]?.drain).toMatchObject({
      status: "requested",
    });

    const entries = await db()`select action, actor_type, actor_id, target, outcome
      from audit_log where action = 'node.drain_requested' order by id`;
    expect(entries).toEqual([
      {
        action: "node.drain_requested",
        actor_type: "operator",
        actor_id: operator.id,
        target: "nodeA",
        outcome: "success",
      },
    ]);

    // A node the scheduler no longer lists leaves the view with the next record.
    await recordNodes([node("nodeA"), node("nodeB")]);
    const later = await getPage(opsNodes.loader, "/ops/nodes", operator.cookie);
    expect((later.body as { nodes: unknown[] }).nodes).toHaveLength(2);
  });

  it("queues the re-creation of a lost node's instances from backups: operators only, audited; 404 and 409 where due", async () => {
    const operator = await newUser();
    await makeOperator(operator);
    const user = await newUser();
    await recordNodes([
      node("nodeR", { role: "manager" }),
      node("nodeL", { state: "down" }),
      node("nodeE", { state: "down", instances: [] }),
    ]);
    const recover = (nodeId: string, cookie: string) =>
      postPage(opsNodes.action, "/ops/nodes", { intent: "recover", nodeId }, cookie);

    expect((await recover("nodeL", user.cookie)).status).toBe(403);
    expect((await recover("nodeZ", operator.cookie)).status).toBe(404);
    expect((await recover("nodeR", operator.cookie)).status).toBe(409); // ready
    expect((await recover("nodeE", operator.cookie)).status).toBe(409); // holds none
    const boss = await getBoss();
    expect(await boss.findJobs("recover-node", {})).toHaveLength(0);

    const queued = await recover("nodeL", operator.cookie);
    expect(queued.status).toBe(303);
    expect(queued.location).toMatch(/^\/ops\/nodes\?notice=/);
    expect(await boss.findJobs("recover-node", { data: { nodeId: "nodeL" } })).toHaveLength(1);
    // Shown on the node's row; a second request while it is due answers 409.
    const page = await getPage(opsNodes.loader, "/ops/nodes", operator.cookie);
    const { nodes } = page.body as { nodes: Array<{ id: string; recovery: unknown }> };
    expect(nodes.find((n) => n.id === "nodeL")?.recovery).toMatchObject({
      status: "requested",
      summary: null,
    });
    const again = await recover("nodeL", operator.cookie);
    expect(again.status).toBe(409);
    expect(await boss.findJobs("recover-node", { data: { nodeId: "nodeL" } })).toHaveLength(1);
    const entries = await db()`select actor_type, actor_id, target, outcome
      from audit_log where action = 'node.recovery_requested'`;
    expect(entries).toEqual([
      { actor_type: "operator", actor_id: operator.id, target: "nodeL", outcome: "success" },
    ]);
  });

  it("sums up a recovery for the node's row: counts, and the first failure's reason", () => {
    const lost = { nodeId: "n1", state: "down", id: "svc" };
    expect(recoverySummary([])).toBe("no instance was left on the node");
    expect(
      recoverySummary([
        { ...lost, instanceId: "ins_a", outcome: "recreated", message: "re-created" },
        { ...lost, instanceId: "ins_b", outcome: "reported", message: "no backup" },
        { ...lost, instanceId: "ins_c", outcome: "failed", message: "no node has room" },
        { ...lost, instanceId: "ins_d", outcome: "failed", message: "image missing" },
      ]),
    ).toBe(
      "1 re-created from backups; 1 without a backup, reported; 2 failed (ins_c: no node has room)",
    );
  });
});
