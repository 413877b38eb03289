import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GATEWAY_PORT } from "../../worker/instances/engine.ts";
import { chooseNode, type NodeCapacity } from "../../worker/runtime/placement.ts";
import { SwarmRuntime } from "../../worker/runtime/swarm.ts";
import {
  PLATFORM_ALIAS_LABEL,
  platformAddresses,
  platformHostAddress,
} from "../../worker/runtime/swarm-networks.ts";
import {
  type ContainerSpec,
  LABELS,
  limitsForPlan,
  NoCapacityError,
} from "../../worker/runtime/types.ts";
import { testLabels, testRun, waitFor } from "./docker-support.ts";
import {
  buildTinyImage,
  describeSwarm,
  fetchFromOverlay,
  probeFrom,
  type SwarmEngine,
  startSwarmEngine,
  TINY_IMAGE,
} from "./swarm-support.ts";

// The Swarm driver against a real swarm: a dedicated dockerd in its own network namespace,
// made a one-node swarm by the test (swarm-support.ts), never the system engine.

const GiB = 1024 ** 3;

describe("placement", () => {
  const node = (id: string, memGiB: number, cpus: number, resMemGiB: number, resCpus: number) =>
    ({
      id,
      hostname: id,
      schedulable: true,
      memoryBytes: memGiB * GiB,
      nanoCpus: cpus * 1e9,
      reservedMemoryBytes: resMemGiB * GiB,
      reservedNanoCpus: resCpus * 1e9,
    }) satisfies NodeCapacity;
  const solo = { memoryBytes: 2 * GiB, nanoCpus: 1e9 };

  it("chooses by free memory and CPU against reservations, not by how many instances run", () => {
    // a runs many small services (little reserved); b runs one big one (most reserved).
    const a = node("a", 16, 8, 4, 2);
    const b = node("b", 16, 8, 12, 6);
    expect(chooseNode([b, a], solo).id).toBe("a");
    // The tighter resource decides: c has memory to spare but almost no CPU left.
    const c = node("c", 64, 8, 0, 6.5);
    expect(chooseNode([c, a], solo).id).toBe("a");
  });

  it("skips nodes that are drained, down or too small, and refuses when none has room", () => {
    const drained = { ...node("d", 64, 16, 0, 0), schedulable: false };
    const full = node("f", 8, 4, 7, 1);
    const ok = node("o", 4, 2, 1, 0);
    expect(chooseNode([drained, full, ok], solo).id).toBe("o");
    expect(() => chooseNode([drained, full], solo)).toThrow(NoCapacityError);
    expect(() => chooseNode([drained, full], solo)).toThrow(
      /No node has room .* 2\.0 GiB and 1 CPUs/,
    );
  });
});

describeSwarm("Swarm driver (a real swarm)", () => {
  let engine: SwarmEngine;
  let rt: SwarmRuntime;
  const network = `agent-swarm-${testRun}`;

  const spec = (n: number, extra: Partial<ContainerSpec> = {}): ContainerSpec => {
    const instanceId = `ins_${testRun}_${n}`;
    return {
      instanceId,
      userId: `usr_${testRun}_${n}`,
      image: TINY_IMAGE,
      hostname: `agent-${instanceId}`.slice(0, 63),
      name: `agent-${instanceId}`,
      volume: `agent-${instanceId}-state`,
      volumeTarget: "/home/node/.openclaw",
      network,
      limits: limitsForPlan("solo"),
      env: { OPENCLAW_GATEWAY_TOKEN: "instance-own-token" },
      labels: testLabels(),
      restartPolicy: "on-failure",
      ...extra,
    };
  };

  beforeAll(async () => {
    engine = await startSwarmEngine(`swt${process.pid}`);
    buildTinyImage(engine);
    rt = new SwarmRuntime({
      host: engine.host,
      settleMs: 45_000,
      anchor: { image: TINY_IMAGE, network },
      isolateGateways: true,
      platformHost: "web",
    });
    await rt.ping();
  }, 120_000);

  afterAll(async () => {
    await engine?.stop();
  }, 60_000);

  it("refuses an engine that is not a swarm manager", async () => {
    const plain = new SwarmRuntime({ host: "unix:///var/run/docker.sock" });
    await expect(plain.ping()).rejects.toThrow(/not a Swarm manager/);
  });

  it("provisions a hardened service pinned to the node with room; start, stop, restart, stats, logs", async () => {
    const { gatewayIp } = await rt.ensureNetwork(network, testLabels());
    expect(gatewayIp).toBeUndefined(); // gateways reach the platform by RUNTIME_PLATFORM_AI_URL
    // The manager fills the network's details in a moment after creating it.
    await expect
      .poll(async () => {
        const net = await engine.docker.getNetwork(network).inspect();
        return { driver: net.Driver, attachable: net.Attachable };
      })
      .toEqual({ driver: "overlay", attachable: true });

    const s = spec(1);
    await rt.ensureVolume(s.volume, { ...testLabels(), [LABELS.instanceId]: s.instanceId }, s);
    expect(await rt.volumeExists(s.volume)).toBe(true);
    const id = await rt.create(s);

    // The service spec as the swarm holds it: one replica at most, pinned, reservations and
    // limits from the plan, hardening.
    const svc = (await engine.docker.getService(id).inspect()) as {
      Spec: {
        Labels: Record<string, string>;
        Mode: { Replicated: { Replicas: number } };
        EndpointSpec?: { Mode?: string; Ports?: unknown[] };
        TaskTemplate: {
          ContainerSpec: { Init: boolean; CapabilityDrop: string[]; Env: string[] };
          Resources: {
            Limits: { NanoCPUs: number; MemoryBytes: number; Pids: number };
            Reservations: { NanoCPUs: number; MemoryBytes: number };
          };
          Placement: { Constraints: string[] };
        };
      };
    };
    const tt = svc.Spec.TaskTemplate;
    expect(svc.Spec.Mode.Replicated.Replicas).toBe(0);
    expect(tt.Placement.Constraints).toEqual([`node.id==${engine.nodeId}`]);
    expect(tt.Resources.Limits).toEqual({ NanoCPUs: 1e9, MemoryBytes: 2 * GiB, Pids: 512 });
    expect(tt.Resources.Reservations).toEqual({ NanoCPUs: 1e9, MemoryBytes: 2 * GiB });
    expect(tt.ContainerSpec.Init).toBe(true);
    expect(tt.ContainerSpec.CapabilityDrop).toEqual(["ALL"]);
    expect(tt.ContainerSpec.Env).toEqual(["OPENCLAW_GATEWAY_TOKEN=instance-own-token"]);
    expect(svc.Spec.EndpointSpec?.Ports ?? []).toEqual([]); // nothing published
    expect(svc.Spec.Labels[LABELS.instanceId]).toBe(s.instanceId);

    const created = await rt.inspect(s.name);
    expect(created?.state).toBe("created");
    expect(created?.running).toBe(false);
    expect(created?.node).toBe(engine.nodeId);

    await rt.start(id);
    const info = await rt.inspect(id);
    expect(info?.running).toBe(true);
    expect(info?.address).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(info?.security).toMatchObject({ init: true, capDrop: ["ALL"] });
    expect(info?.limits).toMatchObject({ memoryBytes: 2 * GiB, nanoCpus: 1e9, pidsLimit: 512 });
    expect(info?.mounts).toContainEqual({
      name: s.volume,
      destination: s.volumeTarget,
      type: "volume",
    });
    expect(info?.imageId).toMatch(/^sha256:/);

    // Non-root, no capabilities, no new privileges, seen from inside the task's container.
    const who = await rt.exec(id, ["id", "-u"]);
    expect(who.stdout.trim()).toBe("1000");
    const status = await rt.exec(id, ["grep", "-E", "^(NoNewPrivs|CapEff)", "/proc/1/status"]);
    expect(status.stdout).toMatch(/NoNewPrivs:\s+1/);
    expect(status.stdout).toMatch(/CapEff:\s+0+\n/);

    // Reachable where the platform's containers sit: attached to the gateways' overlay.
    // A task counts as running once its container exists (the image's own health check may
    // still be starting): wait until the server in it answers.
    const answer = () =>
      fetchFromOverlay(engine, network, info?.address).catch((error: Error) => error.message);
    await expect.poll(answer, { timeout: 60_000 }).toMatch(/^HTTP\/1\.[01] 200/);
    const health = await answer();
    expect(health).toMatch(/^HTTP\/1\.[01] 200/);
    expect(health).toMatch(/\r\n\r\nok\n$/);

    const stats = await rt.stats(id);
    expect(stats.memoryLimitBytes).toBe(2 * GiB);
    expect(stats.pids).toBeGreaterThan(0);
    const logs = await rt.logs(id);
    expect(logs).toContain("hello-from-task");
    expect(logs).toContain("oops");

    await rt.stop(id);
    const stopped = await rt.inspect(id);
    expect(stopped?.running).toBe(false);
    expect(stopped?.state).toBe("exited");
    expect(stopped?.address).toBeUndefined();
    // Stopped, it keeps its reservation on its node: its start must never find the node full.
    const node = (await rt.capacity()).find((n) => n.id === engine.nodeId);
    expect(node?.reservedMemoryBytes).toBe(2 * GiB);

    await rt.start(id);
    // The swarm can report a new task running a moment before its node shows the container (no
    // startedAt yet; seen in CI on a loaded machine): each side waits for its container.
    const startedAt = async () => (await rt.inspect(id))?.startedAt;
    const before = await waitFor(startedAt, { timeoutMs: 60_000, what: "the task's container" });
    await rt.restart(id);
    await waitFor(async () => ((await startedAt()) ?? before) !== before, {
      timeoutMs: 60_000,
      what: "the new task's container",
    });
    const after = await rt.inspect(id);
    expect(after?.running).toBe(true);
    expect(after?.startedAt).not.toBe(before);
    expect(after?.node).toBe(engine.nodeId);
    expect(after?.restartCount).toBeGreaterThan(0);
    await expect
      .poll(
        () =>
          fetchFromOverlay(engine, network, after?.address).catch((error: Error) => error.message),
        { timeout: 60_000 },
      )
      .toMatch(/^HTTP\/1\.[01] 200/);

    const listed = await rt.list({ [LABELS.instanceId]: s.instanceId });
    expect(listed).toEqual([expect.objectContaining({ id, name: s.name, state: "running" })]);

    expect((await rt.volumeHolders(s.volume)).map((h) => h.id)).toEqual([id]);
    await rt.remove(id);
    expect(await rt.inspect(id)).toBeUndefined();
    expect(await rt.volumeHolders(s.volume)).toEqual([]);
    await rt.removeVolume(s.volume);
    expect(await rt.volumeExists(s.volume)).toBe(false);
  }, 180_000);

  it("refuses clearly when no node has room, counting what is reserved", async () => {
    const [node] = await rt.capacity();
    expect(node).toBeDefined();
    if (!node) return;
    const free = node.memoryBytes - node.reservedMemoryBytes;
    const huge = { ...limitsForPlan("solo"), memoryBytes: free + GiB };
    const s = spec(2, { limits: huge });
    await expect(
      rt.ensureVolume(s.volume, { [LABELS.instanceId]: s.instanceId }, { limits: huge }),
    ).rejects.toThrow(NoCapacityError);
    expect(await rt.volumeExists(s.volume)).toBe(false);

    // One instance that fits takes its share: what is left is exactly what it did not reserve.
    const fitting = spec(3);
    await rt.ensureVolume(fitting.volume, { [LABELS.instanceId]: fitting.instanceId }, fitting);
    const id = await rt.create(fitting);
    const [after] = await rt.capacity();
    expect(after?.reservedMemoryBytes).toBe(node.reservedMemoryBytes + 2 * GiB);
    expect(after?.reservedNanoCpus).toBe(node.reservedNanoCpus + 1e9);
    // A demand that fitted before no longer does once the reservation is counted.
    const exact = { ...limitsForPlan("solo"), memoryBytes: free - GiB };
    await expect(rt.place(exact)).rejects.toThrow(/No node has room/);
    await rt.remove(id);
    await rt.removeVolume(fitting.volume);
  }, 120_000);
  it("puts each gateway on an overlay of its own that only the platform's containers share: a tenant reaches the platform by name, never another tenant, before or after a restart", async () => {
    await rt.ensureNetwork(network, testLabels());
    // A platform container (as the stack's web replicas are): on the shared overlay, labelled
    // to join every gateway's overlay as "web". The tiny image answers /healthz on the port.
    const platform = async (name: string) => {
      const c = await engine.docker.createContainer({
        Image: TINY_IMAGE,
        name: `${name}-${testRun}`,
        Labels: { ...testLabels(), [PLATFORM_ALIAS_LABEL]: "web" },
        HostConfig: { NetworkMode: network },
      });
      await c.start();
      return c;
    };
    const web = await platform("web");
    const timings: Record<string, number> = {};
    const made: string[] = [];
    const running = (id: string, on: string) =>
      waitFor(
        async () => {
          const info = await rt.inspect(id);
          return info?.running && info.networks?.[0] === on && info.address;
        },
        { timeoutMs: 60_000, what: `${id} running on ${on}` },
      );
    const isolated = (name: string, labels: Record<string, string>) => {
      if (!rt.ensureIsolatedNetwork) throw new Error("the driver puts gateways on one overlay");
      return rt.ensureIsolatedNetwork(name, labels);
    };
    const probe = (from: string, host: string | undefined) =>
      probeFrom(rt, from, host, GATEWAY_PORT);
    /** The hosts-file entries of a gateway's service. */
    const hostsOf = async (id: string) =>
      (
        (await engine.docker.getService(id).inspect()) as {
          Spec: { TaskTemplate: { ContainerSpec: { Hosts?: string[] } } };
        }
      ).Spec.TaskTemplate.ContainerSpec.Hosts ?? [];
    const addressOf = async (container: { inspect(): Promise<unknown> }, overlay: string) =>
      (
        (await container.inspect()) as {
          NetworkSettings: { Networks: Record<string, { IPAddress: string }> };
        }
      ).NetworkSettings.Networks[overlay]?.IPAddress;
    try {
      // Before: two tenants' gateways on the shared overlay (the layout until now).
      // A quarter CPU each: three fit beside each other on this machine's node.
      const small = { limits: { ...limitsForPlan("solo"), cpus: 0.25, memoryBytes: GiB / 4 } };
      const [a, b, c] = [spec(4, small), spec(5, small), spec(6, small)];
      for (const s of [a, b, c]) {
        await rt.ensureVolume(s.volume, { ...testLabels(), [LABELS.instanceId]: s.instanceId }, s);
      }
      let t0 = Date.now();
      const aId = await rt.create(a);
      await rt.start(aId);
      timings.sharedCreateStartMs = Date.now() - t0;
      made.push(aId);
      const bId = await rt.create(b);
      made.push(bId);
      await rt.start(bId);
      const bShared = await running(bId, network);
      await expect.poll(() => probe(aId, bShared), { timeout: 60_000 }).toMatch(/ 200$/);

      // After: each on its own overlay, as reconcile moves an older gateway (a new task).
      const labels = { ...testLabels(), [LABELS.role]: "gateway-network" };
      const [netA, netB, netC] = [a, b, c].map((s) => `${s.name}-net`) as [string, string, string];
      for (const net of [netA, netB]) await isolated(net, labels);
      const joined = async (container: typeof web) =>
        Object.entries(
          (
            (await container.inspect()) as {
              NetworkSettings: { Networks: Record<string, { Aliases?: string[] }> };
            }
          ).NetworkSettings.Networks,
        )
          .filter(([, n]) => n.Aliases?.includes("web"))
          .map(([name]) => name)
          .sort();
      expect(await joined(web)).toEqual([netA, netB].sort());
      // The platform's container took an address of the subnet's upper half, which the swarm
      // never hands a task (its range is the lower half): no two containers share one.
      const ipam = (await engine.docker.getNetwork(netA).inspect()).IPAM?.Config?.[0] as {
        Subnet: string;
        IPRange: string;
      };
      expect(ipam.IPRange.split("/")[1]).toBe("27");
      const webOnA = (
        (await web.inspect()) as {
          NetworkSettings: { Networks: Record<string, { IPAddress: string }> };
        }
      ).NetworkSettings.Networks[netA]?.IPAddress;
      expect(platformAddresses(ipam.Subnet)[0]).toBe(webOnA);
      // The highest is the platform's host address: the "web" container holds it, and a
      // gateway's hosts file names it "web" (from another node no DNS answers that name).
      expect(platformHostAddress(ipam.Subnet)).toBe(webOnA);
      await rt.moveToNetwork(aId, network, netA);
      await rt.moveToNetwork(bId, network, netB);
      const aOwn = await running(aId, netA);
      const bOwn = await running(bId, netB);
      expect((await rt.inspect(aId))?.networks).toEqual([netA]);
      expect(await hostsOf(aId)).toEqual([`${webOnA} web`]);
      const hostsFile = await rt.exec(aId, ["cat", "/etc/hosts"]);
      expect(hostsFile.stdout).toContain(`${webOnA}\tweb`);

      // A tenant reaches the platform by its name on its own overlay, and the platform it.
      await expect.poll(() => probe(aId, "web"), { timeout: 60_000 }).toMatch(/ 200$/);
      await expect
        .poll(() => fetchFromOverlay(engine, netA, aOwn).catch((e: Error) => e.message), {
          timeout: 60_000,
        })
        .toMatch(/^HTTP\/1\.[01] 200/);
      // B answers the platform, and nothing of B answers A: its address now, the one it had.
      await expect.poll(() => probe(bId, "web"), { timeout: 60_000 }).toMatch(/ 200$/);
      const reached: Record<string, string> = {
        "B's address on the shared overlay, before": "200",
        "B's address": await probe(aId, bOwn),
        "B's address before the move": await probe(aId, bShared),
      };
      // B replaced (a new task, a new address): neither its new nor its old address answers.
      await rt.restart(bId);
      const bNext = await waitFor(
        async () => {
          const next = await running(bId, netB);
          return next !== bOwn && next;
        },
        { timeoutMs: 60_000, what: "B's new task" },
      );
      reached["B's address after its restart"] = await probe(aId, bNext);
      reached["B's address before its restart"] = await probe(aId, bOwn);
      for (const [what, got] of Object.entries(reached).slice(1)) {
        expect(`${what}: ${got}`).toMatch(/: unreached/);
      }
      process.stdout.write(`swarm isolation probes ${JSON.stringify(reached)}\n`);

      // A gateway made on its own overlay from the start (provisioning's way), timed against
      // one on the shared overlay.
      t0 = Date.now();
      await isolated(netC, labels);
      const cId = await rt.create({ ...c, network: netC });
      await rt.start(cId);
      timings.ownOverlayCreateStartMs = Date.now() - t0;
      made.push(cId);
      process.stdout.write(`swarm isolation timings ${JSON.stringify(timings)}\n`);

      const subnetC = (await engine.docker.getNetwork(netC).inspect()).IPAM?.Config?.[0]?.Subnet;
      expect(await hostsOf(cId)).toEqual([`${platformHostAddress(String(subnetC))} web`]);

      // A platform container started later (a new web replica) joins every gateway overlay.
      const web2 = await platform("web2");
      expect(await rt.attachPlatform(labels)).toBe(3);
      expect(await joined(web2)).toEqual([netA, netB, netC].sort());
      expect(await rt.attachPlatform(labels)).toBe(0);
      // The host address's holder goes (a web replica replaced): the next attach moves another
      // "web" container onto it, and the gateway reaches "web" again with its hosts file as it is.
      await web.remove({ force: true });
      expect(await rt.attachPlatform(labels)).toBe(3);
      expect(await addressOf(web2, netA)).toBe(webOnA);
      await expect.poll(() => probe(aId, "web"), { timeout: 60_000 }).toMatch(/ 200$/);
      expect(await rt.attachPlatform(labels)).toBe(0);
      const listed = (await rt.listNetworks(labels)).map((n) => n.name).sort();
      expect(listed).toEqual([netA, netB, netC].sort());

      // Removed with their gateways: the platform containers leave them first.
      for (const id of made.splice(0)) await rt.remove(id);
      for (const net of [netA, netB, netC]) await rt.removeNetwork(net);
      await rt.removeNetwork(netA); // a missing one is fine
      // The node lets go of its own copy of a removed overlay a moment later.
      await expect.poll(() => rt.listNetworks(labels), { timeout: 30_000 }).toEqual([]);
      expect(await joined(web2)).toEqual([]);
      await web2.remove({ force: true });
      for (const s of [a, b, c]) await rt.removeVolume(s.volume);
    } finally {
      for (const id of made) await rt.remove(id).catch(() => {});
      await web.remove({ force: true }).catch(() => {});
    }
  }, 240_000);
});
