import { Readable } from "node:stream";
import type Docker from "dockerode";
import { extract } from "tar-stream";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import {
  type BackupRow,
  getBackup,
  insertPendingBackup,
  readStored,
} from "../../app/server/agents/backups.server.ts";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { nodesOverview, requestDrain, requestRecovery } from "../../app/server/ops/nodes.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { openStream } from "../../app/server/platform/sealed-stream.server.ts";
import { takeBackup } from "../../worker/instances/backup.ts";
import { lostInstances } from "../../worker/instances/drain.ts";
import {
  ensureGatewayNetwork,
  GATEWAY_PORT,
  removeGatewayNetwork,
} from "../../worker/instances/engine.ts";
import { recordClusterNodes, runDrainJob, runRecoveryJob } from "../../worker/instances/nodes.ts";
import { type Settled, settleStaleVolumes } from "../../worker/instances/recover.ts";
import { engineClient } from "../../worker/runtime/docker-engine.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { SwarmRuntime } from "../../worker/runtime/swarm.ts";
import { PLATFORM_ALIAS_LABEL, platformHostAddress } from "../../worker/runtime/swarm-networks.ts";
import {
  type ContainerSpec,
  LABELS,
  limitsForPlan,
  NoCapacityError,
  type ResourceLimits,
} from "../../worker/runtime/types.ts";
import { agentUser } from "../agents/support.ts";
import { buildPlatformImage } from "../deploy/platform-image-build.ts";
import {
  API_CALL,
  deployPlatformStack,
  FAKE_MODEL_REPLY,
  STACK,
} from "../deploy/platform-stack.ts";
import { GATEWAY_IMAGE, testLabels, testRun, waitFor } from "./docker-support.ts";
import { testStorageRoot } from "./storage-support.ts";
import { loadImage, type SwarmCluster, startSwarmCluster } from "./swarm-cluster.ts";
import { buildTinyImage, describeSwarm, probeFrom, TINY_IMAGE } from "./swarm-support.ts";

// The Swarm driver across a real multi-node swarm: two dockerd daemons, each in its own network
// namespace joined by a bridge in a third (swarm-cluster.ts), one swarm. Placement spreads by
// capacity, a full cluster refuses, a drain moves instances with their state one at a time and
// closes the node to new ones, and a node that goes away leaves its instances reported. Last,
// the platform itself deployed with deploy/stack.yml (../deploy/platform-stack.ts): a user signs
// up through its API, their gateway lands on the non-manager node and answers a chat.

const GiB = 1024 ** 3;
/** Half a CPU: a node of this 2-core machine holds four of them. */
const small: ResourceLimits = { ...limitsForPlan("solo"), cpus: 0.5, memoryBytes: GiB };
const STATE = "/home/node/.openclaw";
const storage = await testStorageRoot();

/** A node's availability as an operator sets it (`docker node update --availability`). */
async function setAvailability(docker: Docker, nodeId: string, availability: string) {
  const node = docker.getNode(nodeId);
  const { Version, Spec } = (await node.inspect()) as { Version: { Index: number }; Spec: object };
  await node.update({ version: Version.Index, ...Spec, Availability: availability });
}

/** A promise awaited later: its failure is reported there, not as an unhandled rejection now. */
function inBackground<T>(work: Promise<T>): Promise<T> {
  work.catch(() => undefined);
  return work;
}

describeSwarm("Swarm driver across nodes (a real multi-node swarm)", () => {
  let cluster: SwarmCluster;
  let rt: SwarmRuntime;
  const network = `agent-swarm-${testRun}`;
  const timings: Record<
    string,
    number | Record<string, number> | Record<string, string[]> | Record<string, string>
  > = {};

  const spec = (n: number, limits = small): ContainerSpec => {
    const instanceId = `ins_${testRun}_${n}`;
    return {
      instanceId,
      userId: `usr_${testRun}_${n}`,
      image: TINY_IMAGE,
      hostname: `agent-${instanceId}`.slice(0, 63),
      name: `agent-${instanceId}`,
      volume: `agent-${instanceId}-state`,
      volumeTarget: STATE,
      network,
      limits,
      env: {},
      labels: testLabels(),
      restartPolicy: "on-failure",
    };
  };

  /** Places (by the state volume) and creates an instance; returns its id and node. */
  const provision = async (n: number, limits = small, row?: InstanceRow) => {
    const s = row
      ? {
          ...spec(n, limits),
          instanceId: row.id,
          userId: row.user_id,
          name: row.container_name,
          volume: row.volume_name,
        }
      : spec(n, limits);
    await rt.ensureVolume(s.volume, { ...testLabels(), [LABELS.instanceId]: s.instanceId }, s);
    // Each on an overlay of its own, as provisioning makes it (decision 0201).
    const own = { ...s, network: await ensureGatewayNetwork(s.name, s.instanceId) };
    const id = await rt.create(own);
    made.push({ id, volume: s.volume, name: s.name });
    return { id, spec: own, node: (await rt.nodeOf(id)) as string };
  };
  const made: Array<{ id: string; volume: string; name: string }> = [];
  let gatewayImageLoaded: Promise<void> | undefined;
  let platformImageLoaded: Promise<string> | undefined;

  beforeAll(async () => {
    // The platform image of this checkout, for the stack; it and the gateway image are seeded
    // into the nodes before they start, where the engines allow it (seed-images.ts).
    let t0 = Date.now();
    const platformImage = await buildPlatformImage();
    timings.platformImageMs = Date.now() - t0;
    t0 = Date.now();
    cluster = await startSwarmCluster(2, { seed: [GATEWAY_IMAGE, platformImage] });
    timings.clusterUpMs = Date.now() - t0;
    timings.seeded = cluster.seeded;
    const manager = cluster.manager;
    buildTinyImage({ dir: `/tmp/${testRun}-img`, host: manager.host });
    // The same image id on every node: pinned services name the id.
    timings.imageLoadMs = await loadImage(cluster, TINY_IMAGE, manager.docker);
    rt = new SwarmRuntime({
      host: manager.host,
      nodeEngines: cluster.nodeEngines,
      settleMs: 90_000,
      anchor: { image: TINY_IMAGE, network },
      // As getRuntime builds it for deployments (decision 0201): the platform's name is "web".
      isolateGateways: true,
      platformHost: "web",
    });
    setRuntime(rt);
    await rt.ping();
    await rt.ensureNetwork(network, testLabels());
    // The real gateway image on every node from the machine's engine: the backups' helper
    // containers run it, and the stack's gateways are made of it; the platform image too. A
    // node that was not seeded with them loads them while the first tests run on the tiny
    // image, one after the other (two loads into one engine at once broke its pipe once: EPIPE);
    // the tests that need them wait for them (decision 0184). A seeded node skips the load.
    gatewayImageLoaded = inBackground(
      loadImage(cluster, GATEWAY_IMAGE, engineClient()).then((took) => {
        timings.gatewayImageLoadMs = took;
      }),
    );
    platformImageLoaded = inBackground(
      (async () => {
        await gatewayImageLoaded;
        timings.platformImageLoadMs = await loadImage(cluster, platformImage, engineClient());
        return platformImage;
      })(),
    );
    process.env.AGENT_GATEWAY_IMAGE = GATEWAY_IMAGE;
    process.env.RUNTIME_NETWORK = network;
    process.env.RUNTIME_DEPLOYMENT = testRun;
    // Gateways the test process makes reach the platform by a name on the overlay; nothing
    // answers it (the stack's own gateways reach the stack's web).
    process.env.RUNTIME_PLATFORM_AI_URL = "http://platform-ai:3000/api/ai/v1";
    resetEnvCache();
  }, 400_000);

  // Each test starts on an empty, open cluster, whatever the last one left.
  afterEach(async () => {
    for (const { id, volume, name } of made.splice(0)) {
      await rt.remove(id);
      await rt.removeVolume(volume);
      await removeGatewayNetwork(name);
    }
    for (const n of await rt.nodes()) {
      if (n.state === "ready" && n.availability !== "active") await rt.setDraining(n.id, false);
    }
  }, 120_000);

  afterAll(async () => {
    // No image stream may still be writing to a node that stops.
    await Promise.allSettled([gatewayImageLoaded, platformImageLoaded]);
    process.stdout.write(`swarm cluster timings ${JSON.stringify(timings)}\n`);
    await cluster?.stop();
  }, 120_000);

  it("sees every node with its capacity; the nodes are joined on their own addresses", async () => {
    const nodes = await rt.nodes();
    expect(nodes.map((n) => n.id).sort()).toEqual(cluster.nodes.map((n) => n.nodeId).sort());
    for (const n of nodes) {
      expect(n.state).toBe("ready");
      expect(n.availability).toBe("active");
      expect(n.nanoCpus).toBeGreaterThan(0);
      expect(n.memoryBytes).toBeGreaterThan(0);
      expect(n.address).toMatch(/^192\.168\.213\.\d+$/);
    }
    expect(nodes.find((n) => n.id === cluster.manager.nodeId)?.role).toBe("manager");
    expect(nodes.filter((n) => n.role === "worker")).toHaveLength(1);
  });

  it("holds a gateway on the second node to its storage limit: root read-only, the agent's writes stop at its part, raised live (decision 0228)", async () => {
    if ("reason" in storage) throw new Error(storage.reason);
    const { root } = storage.quota;
    const MiB = 1024 ** 2;
    // The nodes' hosts are this machine: each node's engine reaches the one test root through
    // its storage agent (a container of the node's engine, chroot into the host's /).
    const options = { root, image: TINY_IMAGE, defaultLimitBytes: 128 * MiB };
    const limited = new SwarmRuntime({
      host: cluster.manager.host,
      nodeEngines: cluster.nodeEngines,
      settleMs: 90_000,
    });
    expect(limited.storageEnforcement()).toMatchObject({ enforced: false });
    const state = await limited.configureStorage(options);
    expect(state).toEqual({
      enforced: true,
      mechanism: expect.stringMatching(new RegExp(`${root} on every node \\(.+, .+\\)`)),
    });
    const second = cluster.nodes.find((n) => n !== cluster.manager) as (typeof cluster.nodes)[0];
    const s = { ...spec(90), volume: `agent-${testRun}-limited-state` };
    let id: string | undefined;
    try {
      await limited.ensureVolume(
        s.volume,
        { ...testLabels(), [LABELS.instanceId]: s.instanceId },
        {
          limits: small,
          node: second.nodeId,
          storageLimitBytes: 128 * MiB,
        },
      );
      id = await limited.create(s);
      expect(await limited.nodeOf(id)).toBe(second.nodeId);
      await limited.start(id);
      expect((await limited.inspect(id))?.security.readOnly).toBe(true);
      const inTask = (script: string) =>
        limited.exec(id as string, ["sh", "-c", script], { timeoutMs: 120_000 });
      expect((await inTask("touch /probe 2>&1; echo rc=$?")).stdout).toMatch(
        /Read-only file system[\s\S]*rc=1/,
      );
      expect((await inTask("touch /tmp/probe && echo ok")).stdout).toBe("ok\n");
      // 128 MiB less the gateway's 64 MiB reserve: the agent's workspace stops at 64 MiB.
      const fill = `rm -f ${STATE}/workspace/fill; dd if=/dev/zero of=${STATE}/workspace/fill bs=1M count=96 2>&1; echo rc=$?`;
      expect((await inTask(fill)).stdout).toMatch(/Disk quota exceeded[\s\S]*rc=1/);
      const usage = (await limited.storageUsage()).get(s.volume);
      expect(usage?.limitBytes).toBe(128 * MiB);
      expect(usage?.usedBytes).toBeGreaterThanOrEqual(120 * MiB); // the reserve counts as used
      // Raised live on that node (a storage upgrade): the same write now fits.
      expect(await limited.setStorageLimit(s.volume, 512 * MiB)).toBe(true);
      expect((await inTask(fill)).stdout).toMatch(/rc=0/);
      expect((await limited.storageUsage()).get(s.volume)?.limitBytes).toBe(512 * MiB);
    } finally {
      if (id) await limited.remove(id);
      await limited.removeVolume(s.volume);
    }
    expect(await storage.quota.has(s.volume)).toBe(false);
  }, 300_000);

  it("spreads instances by free capacity and refuses clearly when the cluster is full", async () => {
    // A platform service as the stack's web is: on the manager, on the shared overlay, its
    // container labelled to join every gateway's own overlay as "web" (decision 0201).
    const web = (await cluster.manager.docker.createService({
      Name: `web-${testRun}`,
      Labels: testLabels(),
      TaskTemplate: {
        ContainerSpec: { Image: TINY_IMAGE, Labels: { [PLATFORM_ALIAS_LABEL]: "web" } },
        Placement: { Constraints: [`node.id==${cluster.manager.nodeId}`] },
        Networks: [{ Target: network }],
      },
      Mode: { Replicated: { Replicas: 1 } },
    } as Docker.CreateServiceOptions)) as { id?: string; ID?: string };
    const webContainer = await waitFor(
      async () =>
        (
          await cluster.manager.docker.listContainers({
            filters: { label: [`com.docker.swarm.service.name=web-${testRun}`] },
          })
        )[0]?.Id,
      { timeoutMs: 60_000, what: "the platform service's container" },
    );
    try {
      await spreadsAndIsolates(webContainer);
    } finally {
      await cluster.manager.docker.getService((web.ID ?? web.id) as string).remove();
    }
  }, 300_000);

  const spreadsAndIsolates = async (webContainer: string) => {
    const [first, second] = [await provision(1), await provision(2)];
    // The second goes where the first is not: the other node keeps more free.
    expect(new Set([first.node, second.node]).size).toBe(2);
    const perNode = (await rt.capacity()).map((n) => n.nanoCpus / small.cpus / 1e9);
    const room = perNode.reduce((x, y) => x + Math.floor(y), 0);
    const more = [];
    for (let i = 3; i <= room; i++) more.push(await provision(i));
    const counts = new Map<string, number>();
    for (const x of [first, second, ...more]) counts.set(x.node, (counts.get(x.node) ?? 0) + 1);
    expect([...counts.values()].sort()).toEqual(perNode.map(Math.floor).sort());

    // One more does not fit anywhere: a clear error, and no volume left behind.
    const extra = spec(99);
    await expect(
      rt.ensureVolume(extra.volume, { [LABELS.instanceId]: extra.instanceId }, extra),
    ).rejects.toThrow(NoCapacityError);
    await expect(rt.place(small)).rejects.toThrow(/No node has room .* 1\.0 GiB and 0\.5 CPUs/);
    expect(await rt.volumeExists(extra.volume)).toBe(false);

    // Tenant A's gateway on the node without the platform's container (the web is on the
    // manager), B's on the other node, C's beside A's.
    const [a, b] = first.node === cluster.manager.nodeId ? [second, first] : [first, second];
    const c = more.find((x) => x.node === a.node);
    if (!c) throw new Error("no second instance on A's node");
    // A started instance runs on the node it was placed on (a worker node as well), alone on
    // an overlay of its own.
    const addresses: Record<string, string> = {};
    const networks: Record<string, string[]> = {};
    for (const x of [a, b, c]) {
      await rt.start(x.id);
      const info = await rt.inspect(x.id);
      expect(info?.running).toBe(true);
      expect(info?.node).toBe(x.node);
      addresses[x.id] = info?.address as string;
      networks[x.id] = info?.networks ?? [];
    }
    // A hostile tenant's gateway (A's), one address or name the test made at a time: its own
    // port answers (what the probe sees when a port is open); B's and C's do not, by address
    // or by name, nor B's new address once B's task is replaced, nor the one B held before.
    const probe = (host: string | undefined) => probeFrom(rt, a.id, host, GATEWAY_PORT);
    await expect.poll(() => probe("127.0.0.1"), { timeout: 60_000 }).toMatch(/ 200$/);
    const reached: Record<string, string> = {
      "B's address (other node)": await probe(addresses[b.id]),
      "B's name (other node)": await probe(b.spec.hostname),
      "C's address (same node)": await probe(addresses[c.id]),
      "C's name (same node)": await probe(c.spec.hostname),
    };
    await rt.restart(b.id);
    const replaced = await waitFor(
      async () => {
        const info = await rt.inspect(b.id);
        return info?.running && info.address !== addresses[b.id] && info.address;
      },
      { timeoutMs: 90_000, what: "b's new task" },
    );
    reached["B's address after its task was replaced"] = await probe(replaced);
    reached["B's address before"] = await probe(addresses[b.id]);
    timings.isolationProbes = reached;
    for (const [what, got] of Object.entries(reached)) {
      expect(`${what}: ${got}`).toMatch(/: unreached/);
    }
    for (const x of [a, b, c]) expect(networks[x.id]).toEqual([`${x.spec.name}-net`]);
    // The platform's container on the manager reaches each gateway at its address, and each
    // reaches it by the platform's name (the AI URL's host, "web"), A and C from the other
    // node: their hosts file names the overlay's host address, which the web's container holds.
    const webOn = async (overlay: string) =>
      (
        (await cluster.manager.docker.getContainer(webContainer).inspect()) as {
          NetworkSettings: { Networks: Record<string, { IPAddress: string }> };
        }
      ).NetworkSettings.Networks[overlay]?.IPAddress;
    for (const [x, address] of [
      [a, addresses[a.id]],
      [b, replaced],
      [c, addresses[c.id]],
    ] as const) {
      const overlay = `${x.spec.name}-net`;
      const subnet = (await cluster.manager.docker.getNetwork(overlay).inspect()).IPAM?.Config?.[0]
        ?.Subnet as string;
      expect(await webOn(overlay)).toBe(platformHostAddress(subnet));
      await expect
        .poll(() => probeFrom(rt, x.id, "web", GATEWAY_PORT), { timeout: 60_000 })
        .toMatch(/ 200$/);
      await expect
        .poll(() => probeFrom(rt.manager, webContainer, address, GATEWAY_PORT), {
          timeout: 60_000,
        })
        .toMatch(/ 200$/);
    }
    // The task's own container is on its node's engine, not the manager's.
    const worker = cluster.nodes.find((n) => n.nodeId === a.node);
    const there = await worker?.docker.listContainers({
      filters: { label: [`${LABELS.instanceId}=${a.spec.instanceId}`] },
    });
    expect(there).toHaveLength(1);
  };

  it("drains a node: one instance at a time, state intact, verified healthy; the node takes no new instance", async () => {
    const instances = [] as Array<Awaited<ReturnType<typeof provision>>>;
    for (let i = 10; i < 14; i++) instances.push(await provision(i));
    const source = cluster.manager.nodeId;
    const leaving = instances.filter((x) => x.node === source);
    expect(leaving.length).toBe(2);
    // Memory and sessions as the gateway keeps them: files in the state volume, owned by it.
    for (const x of leaving) {
      const wrote = await rt.runOnce({
        image: TINY_IMAGE,
        volume: x.spec.volume,
        volumeTarget: STATE,
        user: "0",
        capAdd: ["CHOWN"],
        cmd: [
          "sh",
          "-c",
          `mkdir -p ${STATE}/workspace ${STATE}/agents/main/sessions && echo "remember ${x.spec.instanceId}" > ${STATE}/workspace/MEMORY.md && echo '{"role":"user","content":"hi"}' > ${STATE}/agents/main/sessions/s1.jsonl && chown -R 1000:1000 ${STATE} && ls -ln ${STATE}/workspace/MEMORY.md`,
        ],
      });
      expect(wrote).toMatchObject({ exitCode: 0, stderr: "" });
      expect(wrote.stdout).toMatch(/ 1000 +1000 /);
    }
    // One running, one stopped: a drain keeps each as it was.
    const [running, stopped] = leaving as [(typeof leaving)[0], (typeof leaving)[0]];
    await rt.start(running.id);

    const t0 = Date.now();
    // As an operator's drain goes: the worker's record of the nodes, the console's request, the
    // job's handler.
    await recordClusterNodes();
    await requestDrain(source);
    const report = await runDrainJob(source);
    timings.drainMs = Date.now() - t0;
    timings.movesMs = Object.fromEntries(report.moved.map((m) => [m.instanceId, m.ms]));
    expect(report.done).toBe(true);
    expect(report.moved.map((m) => m.ok)).toEqual([true, true]);
    // One at a time: each move ended before the next began.
    const [first, second] = report.moved as [(typeof report.moved)[0], (typeof report.moved)[0]];
    expect(second.at).toBeGreaterThanOrEqual(first.at + first.ms);

    const target = cluster.nodes.find((n) => n.nodeId !== source)?.nodeId as string;
    for (const x of leaving) {
      expect(await rt.nodeOf(x.id)).toBe(target);
      // The source copy is gone; the target holds it.
      expect(
        await cluster.manager.docker
          .getVolume(x.spec.volume)
          .inspect()
          .catch(() => null),
      ).toBeNull();
    }
    const movedRunning = await rt.inspect(running.id);
    expect(movedRunning?.running).toBe(true);
    expect(movedRunning?.health).toBe("healthy");
    expect(movedRunning?.node).toBe(target);
    expect((await rt.inspect(stopped.id))?.running).toBe(false);
    const memory = await rt.exec(running.id, ["cat", `${STATE}/workspace/MEMORY.md`]);
    expect(memory.stdout).toBe(`remember ${running.spec.instanceId}\n`);
    const session = await rt.exec(running.id, ["cat", `${STATE}/agents/main/sessions/s1.jsonl`]);
    expect(session.stdout).toContain('"content":"hi"');
    const owner = await rt.exec(running.id, ["sh", "-c", `ls -ln ${STATE}/workspace/MEMORY.md`]);
    expect(owner.stdout).toMatch(/ 1000 +1000 /);
    await rt.start(stopped.id);
    const other = await rt.exec(stopped.id, ["cat", `${STATE}/workspace/MEMORY.md`]);
    expect(other.stdout).toBe(`remember ${stopped.spec.instanceId}\n`);

    const seen = (await nodesOverview()).find((n) => n.id === source);
    expect(seen).toMatchObject({ availability: "drain", instances: [], drain: { status: "done" } });
    const nodes = await rt.nodes();
    const drained = nodes.find((n) => n.id === source);
    expect(drained?.availability).toBe("drain");
    expect(drained?.instances).toEqual([]);
    expect(nodes.find((n) => n.id === target)?.instances).toHaveLength(4);

    // The target is full now; the drained node, empty, still takes nothing.
    await expect(rt.place(small)).rejects.toThrow(NoCapacityError);
    const last = instances.at(-1) as (typeof instances)[0];
    await rt.remove(last.id);
    await rt.removeVolume(last.spec.volume);
    expect((await rt.place(small)).id).toBe(target);
    await rt.setDraining(source, false);
    expect((await rt.nodes()).find((n) => n.id === source)?.availability).toBe("active");
  }, 600_000);

  it("re-creates a gone node's instance from its latest backup, reports one without; the node back, its stale copy is kept as a backup and removed", async () => {
    await gatewayImageLoaded;
    const worker = cluster.nodes.find((n) => n.nodeId !== cluster.manager.nodeId);
    if (!worker) throw new Error("no worker node");
    // Two instances of two users, both placed on the worker node (the manager closed meanwhile).
    // The first runs a gateway adopted from the warm pool: its labels still carry the pooled id.
    // Beside them, a pooled gateway nobody has adopted: nobody's to re-create.
    await rt.setDraining(cluster.manager.nodeId, true);
    const users = [] as Array<{ row: InstanceRow; placed: Awaited<ReturnType<typeof provision>> }>;
    const pooledId = `gwp_${testRun.replace(/-/g, "")}`;
    for (const n of [30, 31]) {
      const owner = await agentUser("solo");
      const agent = await createAgentRecord(owner.id, { name: `Keeper ${n}`, model: "m" });
      const row = await ensureInstanceRecord(owner.id, { plan: "solo" });
      const labelled = n === 30 ? { ...row, id: `gwp_adopted_${n}` } : row;
      const placed = await provision(n, limitsForPlan("solo"), labelled);
      await updateInstance(row.id, { container_id: placed.id, image: TINY_IMAGE, driver: "swarm" });
      const wrote = await rt.runOnce({
        image: TINY_IMAGE,
        volume: row.volume_name,
        volumeTarget: STATE,
        user: "0",
        capAdd: ["CHOWN"],
        cmd: [
          "sh",
          "-c",
          `mkdir -p ${STATE}/workspace && echo "kept by ${row.id}" > ${STATE}/workspace/MEMORY.md && chown -R 1000:1000 ${STATE}`,
        ],
      });
      expect(wrote).toMatchObject({ exitCode: 0 });
      await rt.start(placed.id);
      if (n === 30) {
        const backup = await insertPendingBackup(agent, "manual");
        await takeBackup(backup.id, (await getInstance(row.id)) as InstanceRow);
      }
      users.push({ row: (await getInstance(row.id)) as InstanceRow, placed });
    }
    // No CPU reserved (the two instances fill the node's): it only has to sit on the node.
    const pooled = await provision(32, { ...small, cpus: 0 });
    await db()`insert into gateway_pool (id, container_name, volume_name, image,
        gateway_token_sealed, state, container_id, node_id, ready_at)
      values (${pooledId}, ${pooled.spec.name}, ${pooled.spec.volume}, ${TINY_IMAGE}, 'sealed',
        'ready', ${pooled.id}, ${pooled.node}, now())`;
    await rt.setDraining(cluster.manager.nodeId, false);
    const [backedUp, bare] = users as [(typeof users)[0], (typeof users)[0]];
    expect(pooled.node).toBe(worker.nodeId);
    expect(backedUp.placed.node).toBe(worker.nodeId);
    expect(bare.placed.node).toBe(worker.nodeId);
    expect(await lostInstances()).toEqual([]);

    await worker.kill();
    await expect
      .poll(async () => (await rt.nodes()).find((n) => n.id === worker.nodeId)?.state, {
        timeout: 90_000,
        interval: 500,
      })
      .toBe("down");
    expect((await lostInstances()).map((l) => [l.instanceId, l.state]).sort()).toEqual(
      [
        [backedUp.row.id, "down"],
        [bare.row.id, "down"],
      ].sort(),
    );
    // Placement skips the node that is down.
    expect((await rt.place(small)).id).toBe(cluster.manager.nodeId);

    // As an operator's recovery goes: the worker's record of the nodes, the console's request,
    // the job's handler.
    const t0 = Date.now();
    await recordClusterNodes();
    await requestRecovery(worker.nodeId);
    const { recovered } = await runRecoveryJob(worker.nodeId);
    timings.recoverMs = Date.now() - t0;
    expect((await nodesOverview()).find((n) => n.id === worker.nodeId)?.recovery).toMatchObject({
      status: "done",
      summary: "1 re-created from backups; 1 without a backup, reported",
    });
    const byId = new Map(recovered.map((r) => [r.instanceId, r]));
    expect(byId.get(backedUp.row.id)).toMatchObject({
      outcome: "recreated",
      to: cluster.manager.nodeId,
    });
    expect(byId.get(bare.row.id)).toMatchObject({ outcome: "reported" });

    // The re-created one runs on the manager, healthy, with the backup's state.
    const info = await rt.inspect(backedUp.placed.id);
    expect(info).toMatchObject({ running: true, health: "healthy", node: cluster.manager.nodeId });
    const memory = await rt.exec(backedUp.placed.id, ["cat", `${STATE}/workspace/MEMORY.md`]);
    expect(memory.stdout).toBe(`kept by ${backedUp.row.id}\n`);
    expect((await getInstance(backedUp.row.id))?.last_error).toMatch(
      /Re-created on node .* from backup/,
    );
    // The other is reported where its owner and the operators see it, and left pinned.
    expect((await getInstance(bare.row.id))?.last_error).toMatch(
      /is down and there is no backup to re-create it from/,
    );
    expect(await rt.nodeOf(bare.placed.id)).toBe(worker.nodeId);
    expect((await lostInstances()).map((l) => l.instanceId)).toEqual([bare.row.id]);

    // The re-created instance goes on; then the node comes back holding its old copy.
    const live = await rt.exec(backedUp.placed.id, [
      "sh",
      "-c",
      `echo "after the re-creation" >> ${STATE}/workspace/MEMORY.md`,
    ]);
    expect(live.exitCode).toBe(0);
    await worker.revive();
    await expect
      .poll(async () => (await rt.nodes()).find((n) => n.id === worker.nodeId)?.state, {
        timeout: 90_000,
        interval: 500,
      })
      .toBe("ready");
    const volume = backedUp.row.volume_name;
    expect(await rt.nodeOfVolume(volume)).toBe(cluster.manager.nodeId); // the live copy answers
    expect(await rt.staleVolumes()).toEqual([
      { volume, nodeId: worker.nodeId, instanceId: "gwp_adopted_30" }, // its volume's label
    ]);

    // Settled: the stale copy is kept as a backup of the user's agent, then removed. A pass that
    // finds the old task still running there (the swarm shuts it down as the node rejoins)
    // leaves the copy for the next pass.
    let settled: Settled[] = [];
    await expect
      .poll(
        async () => {
          settled = await settleStaleVolumes();
          return settled.map((s) => s.outcome);
        },
        { timeout: 60_000, interval: 1_000 },
      )
      .toEqual(["removed"]);
    expect(settled).toMatchObject([{ volume, nodeId: worker.nodeId }]);
    expect(settled[0]?.backupIds).toHaveLength(1);
    const kept = (await getBackup(settled[0]?.backupIds[0] as string)) as BackupRow;
    expect(kept).toMatchObject({ reason: "node-returned", status: "ready" });
    const files = new Map<string, string>();
    const reader = extract();
    Readable.from(openStream(await readStored(kept))).pipe(reader);
    for await (const entry of reader) {
      const chunks: Buffer[] = [];
      for await (const chunk of entry) chunks.push(chunk as Buffer);
      files.set(entry.header.name, Buffer.concat(chunks).toString());
    }
    const leftBehind = [...files].find(([name]) => name.endsWith("workspace/MEMORY.md"))?.[1];
    expect(leftBehind).toBe(`kept by ${backedUp.row.id}\n`); // the old copy's, not the live one's
    await expect(worker.docker.getVolume(volume).inspect()).rejects.toMatchObject({
      statusCode: 404,
    });
    expect(await rt.staleVolumes()).toEqual([]);
    expect(await settleStaleVolumes()).toEqual([]);
    const after = await rt.exec(backedUp.placed.id, ["cat", `${STATE}/workspace/MEMORY.md`]);
    expect(after.stdout).toContain("after the re-creation");
    // The instance without a backup came back with its node, its own copy untouched.
    expect(await rt.nodeOfVolume(bare.row.volume_name)).toBe(worker.nodeId);
  }, 420_000);

  it("deploys the platform with deploy/stack.yml; a warm gateway per node; through its API a user's gateway is adopted on a worker node and answers a chat; an operator's drain moves it, its session goes on", async () => {
    // The platform image of this checkout and the gateway image, on every node (the platform
    // image's load waits for the gateway image's).
    const image = (await platformImageLoaded) as string;
    const t1 = Date.now();
    const email = `stack-${testRun}@example.com`;
    const stack = await deployPlatformStack(cluster, {
      image,
      gatewayImage: GATEWAY_IMAGE,
      operatorEmail: email, // the user is also the deployment's operator (OPERATOR_EMAILS)
      poolSize: 1, // a warm gateway on every node (decision 0181)
    });
    timings.stackUpMs = Date.now() - t1;
    const worker = cluster.nodes.find((n) => n.nodeId !== cluster.manager.nodeId);
    if (!worker) throw new Error("no worker node");
    try {
      // Web's two replicas, the worker on the manager (its socket), the db on its labelled node.
      await expect
        .poll(async () => (await stack.placement())[`${STACK}_web`]?.length, { timeout: 120_000 })
        .toBe(2);
      const placed = await stack.placement();
      expect(placed[`${STACK}_worker`]).toEqual([cluster.manager.nodeId]);
      expect(placed[`${STACK}_db`]).toEqual([cluster.manager.nodeId]);

      let cookie = "";
      const api = async (method: string, url: string, body?: unknown, form?: object) => {
        const out = JSON.parse(
          await stack.inWeb(API_CALL, {
            METHOD: method,
            URL_PATH: url,
            BODY: body === undefined ? "" : JSON.stringify(body),
            FORM: form === undefined ? "" : JSON.stringify(form),
            COOKIE: cookie,
          }),
        ) as { status: number; body: Record<string, unknown>; cookie: string };
        return out;
      };
      // A chat as a client sends it: again after a 502 "gateway unavailable" (nothing was
      // delivered), for up to two minutes, and still must be answered; each such 502 is
      // recorded in the timings. The chat after the drain met one in some runs (2 of ~5): a
      // sampler pass could write an observation of the gateway stopped for its move after the
      // move had recorded the new task, leaving the row without an address for a pass (fixed,
      // decision 0208). The retry stays until runs show no 502 here.
      const unavailable: string[] = [];
      timings.stackChatUnavailable = { seen: unavailable };
      const chatAnswered = (body: Record<string, unknown>) =>
        waitFor(
          async () => {
            const res = await api("POST", "/api/agent", body);
            if (res.status === 502 && /unavailable/.test(String(res.body.error))) {
              unavailable.push(String(res.body.error));
              return undefined;
            }
            return res;
          },
          { timeoutMs: 120_000, intervalMs: 2_000, what: "the chat answered" },
        );
      const signup = await api("POST", "/api/register", {
        email,
        password: "a good long password",
        name: "Stack",
      });
      expect(signup.status).toBe(201);
      cookie = signup.cookie;

      // The warm pool, node by node: each node gets a ready pooled gateway of its own, as the
      // operator's node page shows it.
      const warmOn = (page: string, nodeId: string) =>
        Number(new RegExp(`data-testid="node-warm-${nodeId}">(\\d+)<`).exec(page)?.[1] ?? -1);
      await waitFor(
        async () => {
          const page = String((await api("GET", "/ops/nodes")).body);
          return cluster.nodes.every((n) => warmOn(page, n.nodeId) === 1);
        },
        { timeoutMs: 600_000, intervalMs: 2_000, what: "a ready pooled gateway on every node" },
      );
      timings.stackPoolReadyMs = Date.now() - t1;
      const gatewayServices = async () =>
        (
          (await cluster.manager.docker.listServices({
            filters: { label: [LABELS.instanceId] },
          })) as Array<{
            Spec: {
              Name: string;
              TaskTemplate?: {
                ContainerSpec?: { Healthcheck?: { StartPeriod?: number } };
                Placement?: { Constraints?: string[] };
              };
            };
          }>
        ).map((x) => ({
          name: x.Spec.Name,
          healthStartPeriod: x.Spec.TaskTemplate?.ContainerSpec?.Healthcheck?.StartPeriod,
          node: /node\.id==(\S+)/.exec(
            (x.Spec.TaskTemplate?.Placement?.Constraints ?? []).join(" "),
          )?.[1],
        }));
      const pooled = await gatewayServices();
      expect(pooled.map((p) => p.node).sort()).toEqual(cluster.nodes.map((n) => n.nodeId).sort());
      // The worker's boot bound (GATEWAY_HEALTH_TIMEOUT_MS, 480 s here) is each gateway's health
      // start period: the swarm replaces no boot the worker still waits for (decision 0252).
      expect(pooled.map((p) => p.healthStartPeriod)).toEqual(pooled.map(() => 480e9));
      const adoptable = pooled.find((p) => p.node === worker.nodeId)?.name as string;
      const runningOn = (node: (typeof cluster.nodes)[0], service: string) =>
        node.docker.listContainers({
          filters: { label: [`com.docker.swarm.service.name=${service}`], status: ["running"] },
        });
      // The service's tasks as the manager tells them, for a failure's message.
      const tasksOf = async (service: string) =>
        JSON.stringify(
          (
            (await cluster.manager.docker.listTasks({ filters: { service: [service] } })) as Array<{
              NodeID?: string;
              DesiredState?: string;
              Status?: { State?: string; Timestamp?: string; Message?: string; Err?: string };
            }>
          ).map((t) => ({ node: t.NodeID, desired: t.DesiredState, ...t.Status })),
        );

      // The manager takes no new task (an operator's pause): its pooled gateway cannot be
      // adopted, so the agent gets the worker node's.
      await setAvailability(cluster.manager.docker, cluster.manager.nodeId, "pause");
      const t2 = Date.now();
      const provisioned = await api("POST", "/api/agents/provision", { name: "Stacked" });
      expect(provisioned.status).toBe(201);
      const agentId = (provisioned.body.agent as { id: string }).id;
      const running = await waitFor(
        async () => {
          const { body } = await api("GET", `/api/agents/${agentId}`);
          const agent = body.agent as { status?: string } | undefined;
          return agent?.status === "running" || agent?.status === "error" ? agent : undefined;
        },
        { timeoutMs: 600_000, intervalMs: 2_000, what: "the agent running" },
      ).finally(() => setAvailability(cluster.manager.docker, cluster.manager.nodeId, "active"));
      timings.stackProvisionToRunningMs = Date.now() - t2;
      expect(running).toMatchObject({ status: "running" });
      // Adopted, not booted cold: every gateway service is a pooled one's.
      expect((await gatewayServices()).every((g) => g.name.startsWith("agent-gwp_"))).toBe(true);
      const [adopted] = await runningOn(worker, adoptable);
      expect(adopted).toBeDefined();
      // The engine keeps the image's probe and takes the bound as its start period.
      const { Config } = await worker.docker.getContainer(adopted?.Id as string).inspect();
      expect(Config.Healthcheck).toMatchObject({ StartPeriod: 480e9, Test: expect.any(Array) });
      expect(Config.Healthcheck?.Test?.join(" ")).toContain("/healthz");

      // web → the gateway over the overlay, across nodes; the gateway → web's AI endpoint
      // (http://web:3000) → the model server.
      const t3 = Date.now();
      const chat = await chatAnswered({ message: "Hello from the stack" });
      timings.stackFirstReplyMs = Date.now() - t3;
      expect(chat.status).toBe(200);
      expect(chat.body.reply).toBe(FAKE_MODEL_REPLY);
      const sessionId = chat.body.sessionId as string;

      // The operator drains the worker node from the console (/ops/nodes); the stack's worker
      // moves the gateway to the manager with its state, and the same session goes on there.
      const drain = await api("POST", "/ops/nodes", undefined, {
        intent: "drain",
        nodeId: worker.nodeId,
      });
      expect(drain.status).toBe(303);
      const t4 = Date.now();
      // As the operator reads it on the console's page (only this node was ever drained).
      await waitFor(
        async () => {
          const { body } = await api("GET", "/ops/nodes");
          const page = String(body).replaceAll("<!-- -->", "");
          // A failed drain is final: its message, at once (not 10 minutes of polling).
          return /drain failed[^<]*/.exec(page)?.[0] ?? (page.includes("drain done") && "done");
        },
        { timeoutMs: 600_000, intervalMs: 2_000, what: "the drain done" },
      ).then((outcome) => expect(outcome).toBe("done"));
      timings.stackDrainMs = Date.now() - t4;
      // The agent's gateway runs on the manager now; the worker node's pooled gateway was
      // discarded, not moved (the swarm stops its task a moment later).
      expect(await runningOn(cluster.manager, adoptable), await tasksOf(adoptable)).toHaveLength(1);
      await waitFor(
        async () =>
          (
            await worker.docker.listContainers({
              filters: { label: [LABELS.instanceId], status: ["running"] },
            })
          ).length === 0,
        { timeoutMs: 120_000, what: "no gateway left running on the drained node" },
      );
      const next = await chatAnswered({ message: "Still there?", sessionId });
      expect(next.status).toBe(200);
      expect(next.body).toMatchObject({ sessionId, reply: FAKE_MODEL_REPLY });
      const session = await api("GET", `/api/agent?action=session&sessionId=${sessionId}`);
      expect(session.status).toBe(200);
      const history = JSON.stringify(session.body);
      expect(history).toContain("Hello from the stack"); // written before the move
      expect(history).toContain("Still there?");
    } finally {
      await stack.remove();
      // The gateway is the worker's, not the stack's: removed as its instance label finds it.
      const services = (await cluster.manager.docker.listServices({
        filters: { label: [LABELS.instanceId] },
      })) as Array<{ ID: string }>;
      for (const s of services) await cluster.manager.docker.getService(s.ID).remove();
    }
  }, 1_500_000);
});
