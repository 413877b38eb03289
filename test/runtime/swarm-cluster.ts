import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import type Docker from "dockerode";
import { engineClient } from "../../worker/runtime/docker-engine.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { seedImages } from "./seed-images.ts";
import {
  claimRunDir,
  cleanSwarmLeftovers,
  SWARM_NODES_DIR,
  SWARM_PREFIX,
  SWARM_RUN_DIR,
} from "./swarm-leftovers.ts";

// A real multi-node swarm on this one machine: a hub network namespace holding a bridge, and one
// network namespace per node joined to it by a veth pair, each running its own dockerd (own data
// root, exec root, pid file, socket, containerd namespace; no default bridge, no iptables). The
// nodes talk to each other only on the hub's addresses (192.168.213.0/24, inside namespaces this
// support makes) and on their loopback; the machine's own network is never touched. Node data
// roots (SWARM_NODES_DIR) are on tmpfs where there is one, and images of the machine's engine
// are seeded into them before their dockerd starts (seed-images.ts: seconds, where a `docker
// load` of the 860 MB gateway image costs ~30 s of CPU per node); they go with the cluster.
// Without tmpfs they live under .data/swarm-nodes/ and are kept between runs so images are
// loaded once. Either way a node's swarm state, networks, containers and volumes are wiped at
// start.

export interface ClusterNode {
  /** n1, n2, … (n1 is the manager). */
  name: string;
  address: string;
  host: string;
  docker: Docker;
  nodeId: string;
  /** Stops this node's dockerd (the node goes down in the swarm); idempotent. */
  kill(): Promise<void>;
  /** Starts a killed node's dockerd again on its data root, as it was (it rejoins the swarm). */
  revive(): Promise<void>;
}

export interface SwarmCluster {
  nodes: ClusterNode[];
  manager: ClusterNode;
  /** SWARM_NODE_ENGINES for the driver: node id → that node's engine. */
  nodeEngines: Record<string, string>;
  /** Per node, the `seed` images it got by hard links (the rest are for `loadImage`). */
  seeded: Record<string, string[]>;
  stop(): Promise<void>;
}

const SUBNET = "192.168.213";
const ns = (name: string) => `${SWARM_PREFIX}-${name}`;
const ip = (...args: string[]) => execFileSync("ip", args, { stdio: ["ignore", "pipe", "pipe"] });

function wipeSwarmState(dataRoot: string): void {
  // The swarm's raft and certificates and the engine's network store of the last run: every
  // run makes a fresh swarm. Images (image/, overlay2/) stay.
  for (const dir of ["swarm", "network"])
    rmSync(path.join(dataRoot, dir), { recursive: true, force: true });
}

/** Starts node `name`'s dockerd in its namespace on its data root; resolves once it answers. */
async function spawnDockerd(name: string, docker: Docker): Promise<ChildProcess> {
  const home = path.join(SWARM_NODES_DIR, name);
  const run = path.join(SWARM_RUN_DIR, name);
  const sock = path.join(run, "docker.sock");
  // nsenter --net, not `ip netns exec` (that remounts /sys and dockerd loses the devices cgroup).
  // --no-new-privileges: engine 20.10 has no per-service switch for it (decision 0145).
  const child = spawn(
    "nsenter",
    [
      `--net=/var/run/netns/${ns(name)}`,
      "dockerd",
      `--host=unix://${sock}`,
      `--data-root=${path.join(home, "data")}`,
      `--exec-root=${path.join(run, "exec")}`,
      `--pidfile=${path.join(home, "dockerd.pid")}`,
      `--containerd-namespace=${SWARM_PREFIX}-${name}`,
      `--containerd-plugins-namespace=${SWARM_PREFIX}-${name}-plugins`,
      "--bridge=none",
      "--iptables=false",
      "--ip6tables=false",
      "--no-new-privileges",
    ],
    { stdio: ["ignore", "ignore", "ignore"] },
  );
  await waitFor(async () => (await docker.ping()) !== undefined, {
    timeoutMs: 60_000,
    what: `test swarm node ${name}`,
  });
  return child;
}

async function startNode(
  index: number,
  seed: { images: string[]; from?: string },
): Promise<{
  name: string;
  address: string;
  host: string;
  docker: Docker;
  child: ChildProcess;
  seeded: string[];
}> {
  const name = `n${index}`;
  const address = `${SUBNET}.${10 + index}`;
  const netns = ns(name);
  ip("netns", "add", netns);
  ip(
    "-n",
    ns("hub"),
    "link",
    "add",
    `vh${index}`,
    "type",
    "veth",
    "peer",
    "name",
    "eth0",
    "netns",
    netns,
  );
  ip("-n", ns("hub"), "link", "set", `vh${index}`, "master", "br0", "up");
  ip("-n", netns, "addr", "add", `${address}/24`, "dev", "eth0");
  ip("-n", netns, "link", "set", "eth0", "up");
  ip("-n", netns, "link", "set", "lo", "up");

  const home = path.join(SWARM_NODES_DIR, name);
  const dataRoot = path.join(home, "data");
  const run = path.join(SWARM_RUN_DIR, name);
  mkdirSync(dataRoot, { recursive: true });
  mkdirSync(run, { recursive: true });
  wipeSwarmState(dataRoot);
  const seeded =
    seed.images.length > 0
      ? await seedImages(engineClient(), dataRoot, seed.images, seed.from)
      : [];
  const sock = path.join(run, "docker.sock");
  const docker = engineClient({ socketPath: sock });
  const child = await spawnDockerd(name, docker);
  // What the last run left in the kept data root.
  for (const c of await docker.listContainers({ all: true })) {
    await docker.getContainer(c.Id).remove({ force: true, v: true });
  }
  const { Volumes } = await docker.listVolumes();
  for (const v of Volumes ?? []) await docker.getVolume(v.Name).remove({ force: true });
  return { name, address, host: `unix://${sock}`, docker, child, seeded };
}

async function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  await exited;
  clearTimeout(timer);
}

/**
 * Makes the hub, `count` nodes and one swarm (n1 manager, the rest workers). `seed`: images of
 * the machine's engine to put into every node's data root before it starts (seed-images.ts).
 */
export async function startSwarmCluster(
  count = 2,
  options: { seed?: string[] } = {},
): Promise<SwarmCluster> {
  await cleanSwarmLeftovers();
  const children: ChildProcess[] = [];
  const stopAll = async (started: Array<{ docker: Docker; child: ChildProcess }>) => {
    for (const n of [...started].reverse()) {
      // Services first (on the manager), then each node's own containers, then the engine.
      await n.docker
        .listServices()
        .then((s) => Promise.all(s.map((x) => n.docker.getService(x.ID).remove())))
        .catch(() => {});
      await n.docker
        .listContainers({ all: true })
        .then((cs) =>
          Promise.all(cs.map((c) => n.docker.getContainer(c.Id).remove({ force: true, v: true }))),
        )
        .catch(() => {});
    }
    for (const c of children) await killChild(c);
    await cleanSwarmLeftovers();
  };
  const started: Array<{
    name: string;
    address: string;
    host: string;
    docker: Docker;
    child: ChildProcess;
    seeded: string[];
  }> = [];
  try {
    claimRunDir();
    ip("netns", "add", ns("hub"));
    ip("-n", ns("hub"), "link", "set", "lo", "up");
    ip("-n", ns("hub"), "link", "add", "br0", "type", "bridge");
    ip("-n", ns("hub"), "link", "set", "br0", "up");
    for (let i = 1; i <= count; i++) {
      // The first node copies from the machine's engine, the others link to the first's files.
      const node = await startNode(i, {
        images: options.seed ?? [],
        from: i > 1 ? path.join(SWARM_NODES_DIR, "n1", "data") : undefined,
      });
      children.push(node.child);
      started.push(node);
    }
    const [first, ...rest] = started;
    if (!first) throw new Error("a swarm needs a node");
    await first.docker.swarmInit({
      ListenAddr: `${first.address}:2377`,
      AdvertiseAddr: first.address,
      // Overlay subnets of the test swarm's own; they live inside the nodes' namespaces.
      DefaultAddrPool: ["10.231.0.0/16"],
      SubnetSize: 24,
    });
    const swarm = (await first.docker.swarmInspect()) as { JoinTokens: { Worker: string } };
    for (const n of rest) {
      await n.docker.swarmJoin({
        ListenAddr: `${n.address}:2377`,
        AdvertiseAddr: n.address,
        RemoteAddrs: [`${first.address}:2377`],
        JoinToken: swarm.JoinTokens.Worker,
      });
    }
    const nodes: ClusterNode[] = [];
    for (const n of started) {
      const info = await n.docker.info();
      const nodeId = (info.Swarm as { NodeID: string }).NodeID;
      nodes.push({
        name: n.name,
        address: n.address,
        host: n.host,
        docker: n.docker,
        nodeId,
        kill: () => killChild(n.child),
        revive: async () => {
          if (n.child.exitCode === null && n.child.signalCode === null) return;
          n.child = await spawnDockerd(n.name, n.docker);
          children.push(n.child);
        },
      });
    }
    await waitFor(
      async () => {
        const listed = (await first.docker.listNodes()) as Array<{ Status?: { State?: string } }>;
        return listed.length === count && listed.every((x) => x.Status?.State === "ready");
      },
      { timeoutMs: 60_000, what: "every node ready in the swarm" },
    );
    const manager = nodes[0] as ClusterNode;
    return {
      nodes,
      manager,
      nodeEngines: Object.fromEntries(nodes.map((n) => [n.nodeId, n.host])),
      seeded: Object.fromEntries(started.map((n) => [n.name, n.seeded])),
      stop: () => stopAll(started),
    };
  } catch (error) {
    await stopAll(started);
    throw error;
  }
}

/**
 * Loads an image into every node with `docker save | docker load` from `source` (the same image
 * id everywhere: instances are pinned to ids). A node that holds that id already (a kept data
 * root) is skipped. Returns the milliseconds each node took (0 when skipped).
 */
export async function loadImage(
  cluster: SwarmCluster,
  image: string,
  source: Docker,
): Promise<Record<string, number>> {
  const { Id } = (await source.getImage(image).inspect()) as { Id: string };
  const took: Record<string, number> = {};
  // One node after the other: side by side they took longer in all (the nodes share one disk:
  // 84 and 94 s against 31 and 42 s one after the other).
  for (const node of cluster.nodes) {
    const have = await node.docker
      .getImage(image)
      .inspect()
      .then((i) => (i as { Id: string }).Id)
      .catch(() => undefined);
    if (have === Id) {
      took[node.name] = 0;
      continue;
    }
    const t0 = Date.now();
    const tar = await source.getImage(image).get();
    const loading = (await node.docker.loadImage(tar)) as NodeJS.ReadableStream;
    await new Promise<void>((resolve, reject) => {
      node.docker.modem.followProgress(loading, (err) => (err ? reject(err) : resolve()));
    });
    took[node.name] = Date.now() - t0;
  }
  return took;
}
