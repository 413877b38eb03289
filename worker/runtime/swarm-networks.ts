import { createHash } from "node:crypto";
import type Docker from "dockerode";
import { type SubnetPool, subnetAt } from "./docker-networks.ts";
import { LABELS, RuntimeUnavailableError } from "./types.ts";

// The Swarm driver's networks (decision 0201). Overlays have no inter-container-traffic switch:
// whatever shares one reaches every port of every other member. So each gateway service sits on
// an overlay of its own, and the only other members of it are the platform's own containers
// (web replicas, workers: the containers labelled PLATFORM_ALIAS_LABEL), which the worker
// connects to it with that label's value as their name there: a gateway reaches the web's AI
// endpoint at http://web:3000, the web reaches the gateway at its address, and a container does
// not forward packets between its networks, so no gateway reaches another's overlay. The shared
// overlay (RUNTIME_NETWORK) stays for the platform's services and gateways made before.
//
// A service's task container can join only an overlay its node already has (the engine refuses
// a managed container one it would have to ask the manager for: "network … not found"), and a
// node has a gateway's overlay only while something on it uses it. So each node with platform
// containers gets an anchor: a plain container of ours that sleeps, serves nothing, and joins
// every gateway overlay first (a plain container may ask the manager), so the web and the worker
// there can follow.
//
// A service's container connected that way takes an address its node picks, which the manager,
// handing out the gateway's task addresses, knows nothing of: two containers ended up on one
// address ("Address already in use" at a task's start, or silently across nodes). So a
// gateway's overlay gets a subnet the platform picks (RUNTIME_TENANT_SUBNETS, a /26 each) whose
// lower half alone the swarm allocates from (the gateway's tasks, the anchors), and the worker
// gives each platform container an address of the upper half.
//
// A gateway on another node than a platform container does not resolve that container's name
// (Docker's embedded DNS learns a `docker network connect` alias on the container's own node
// only). So the upper half's highest address is the platform's host address: the worker keeps
// it held by a running container whose alias is the name gateways call the platform by (the
// host of RUNTIME_PLATFORM_AI_URL, `web`), and every gateway's service names it in its hosts
// file (ContainerSpec.Hosts, written before its task starts, so never updated: the address
// stays, its holder may change). When the holder goes (a web replica replaced), the next
// attach gives the address to another web container (decision 0201).

/** A running container carrying it joins every gateway's overlay under the label's value. */
export const PLATFORM_ALIAS_LABEL = "agent-platform.gateway-alias";

type Call = <T>(fn: () => Promise<T>) => Promise<T>;

const statusOf = (error: unknown) => (error as { statusCode?: number }).statusCode;
const messageOf = (error: unknown) => (error as Error).message ?? "";

/** How large a gateway's overlay is: half for the swarm's tasks, half for the platform's. */
export const OVERLAY_PREFIX = 26;

const toInt = (ip: string) => ip.split(".").reduce((n, octet) => n * 256 + Number(octet), 0) >>> 0;
const toIp = (n: number) => [24, 16, 8, 0].map((shift) => (n >>> shift) & 255).join(".");

/** The platform containers' addresses on a subnet: its upper half, highest first, no broadcast. */
export function platformAddresses(subnet: string): string[] {
  const [address = "", bits = ""] = subnet.split("/");
  const size = 2 ** (32 - Number(bits));
  const base = toInt(address);
  const out: string[] = [];
  for (let i = size - 2; i >= size / 2; i--) out.push(toIp(base + i));
  return out;
}

/** The platform's host address on a split subnet (above): its upper half's highest. */
export function platformHostAddress(subnet: string): string {
  return platformAddresses(subnet)[0] as string;
}

/** A gateway service's hosts-file entries naming the platform `host` on a split subnet. */
export function platformHostEntries(subnet: string, host: string): string[] {
  return [`${platformHostAddress(subnet)} ${host}`];
}

const overlaps = (error: unknown) => /overlap|already (in use|allocated)/i.test(messageOf(error));

type Ipam = { Subnet: string; Gateway: string; IPRange: string };

/**
 * Creates the attachable overlay `name` when missing. With a pool (a gateway's overlay), on the
 * first free subnet from the name's place in it, the swarm allocating from its lower half only
 * (above); without, the swarm's address pool picks.
 */
export async function ensureOverlay(
  docker: Docker,
  call: Call,
  name: string,
  labels: Record<string, string>,
  pool?: SubnetPool,
): Promise<void> {
  try {
    await call(() => docker.getNetwork(name).inspect());
    return;
  } catch (error) {
    if (statusOf(error) !== 404) throw error;
  }
  const create = (ipam: Ipam | undefined) =>
    call(() =>
      docker.createNetwork({
        Name: name,
        Driver: "overlay",
        // Attachable: the platform's containers (not services of ours) are connected to it.
        Attachable: true,
        CheckDuplicate: true,
        Labels: { ...labels, [LABELS.managed]: "1" },
        ...(ipam ? { IPAM: { Driver: "default", Config: [ipam] } } : {}),
      }),
    );
  const start = pool ? createHash("sha256").update(name).digest().readUInt32BE(0) % pool.count : 0;
  const probes = pool ? Math.min(pool.count, 512) : 1;
  for (let probe = 0; probe < probes; probe++) {
    let ipam: Ipam | undefined;
    if (pool) {
      const { subnet, gateway } = subnetAt(pool, (start + probe) % pool.count);
      const lowerHalf = `${subnet.split("/")[0]}/${pool.prefix + 1}`;
      ipam = { Subnet: subnet, Gateway: gateway, IPRange: lowerHalf };
    }
    try {
      await create(ipam);
      return;
    } catch (error) {
      if (statusOf(error) === 409) return; // made by a concurrent caller
      if (!pool || !overlaps(error)) throw error;
    }
  }
  throw new Error(`no free subnet for network ${name} in the tenant pool (${pool?.count} in all)`);
}

/** The subnet of an overlay whose addresses the platform splits (above), if it is one. */
export async function splitSubnet(docker: Docker, overlay: string): Promise<string | undefined> {
  const info = await docker.getNetwork(overlay).inspect();
  const config = (info.IPAM?.Config ?? [])[0] as { Subnet?: string; IPRange?: string } | undefined;
  return config?.Subnet && config.IPRange ? config.Subnet : undefined;
}

/**
 * The overlay's split subnet, from the first engine that has the overlay: a worker node's engine
 * answers 404 for a swarm overlay nothing on it uses yet, and the engines come in the swarm's
 * node order, not manager first (the swarm-cluster tests failed on that in about half the runs).
 */
async function subnetSeenBy(engines: Docker[], overlay: string): Promise<string | undefined> {
  for (const engine of engines) {
    try {
      return await splitSubnet(engine, overlay);
    } catch (error) {
      if (statusOf(error) !== 404) throw error;
    }
  }
  return undefined;
}

/** The addresses on an overlay that the given engines' containers hold (each sees its own). */
async function addressesInUse(engines: Docker[], overlay: string): Promise<Set<string>> {
  const used = new Set<string>();
  for (const engine of engines) {
    const info = await engine
      .getNetwork(overlay)
      .inspect()
      .catch(() => undefined);
    const containers = (info?.Containers ?? {}) as Record<string, { IPv4Address?: string }>;
    for (const c of Object.values(containers)) {
      if (c.IPv4Address) used.add(c.IPv4Address.split("/")[0] as string);
    }
  }
  return used;
}

/** The running platform containers on one engine, with the name each takes on gateway overlays. */
export async function platformContainers(engine: Docker) {
  const found = await engine.listContainers({
    filters: { label: [PLATFORM_ALIAS_LABEL], status: ["running"] },
  });
  return found.map((c) => ({
    id: c.Id,
    alias: c.Labels?.[PLATFORM_ALIAS_LABEL] ?? "",
    networks: new Set(Object.keys(c.NetworkSettings?.Networks ?? {})),
  }));
}

/** The anchor of a node (above): an image every node has, and the overlay it starts on. */
export interface AnchorSpec {
  image: string;
  /** The shared, attachable overlay (a plain container needs a network to start on). */
  network: string;
}

const ANCHOR_NAME = "agent-platform-network-anchor";
export const ANCHOR_ROLE = "network-anchor";

/** The node's anchor, created and started when missing; returns its id. */
async function ensureAnchor(engine: Docker, spec: AnchorSpec): Promise<string> {
  const container = engine.getContainer(ANCHOR_NAME);
  const running = await container.inspect().then(
    (c) => c.State.Running,
    (error: unknown) => {
      if (statusOf(error) !== 404) throw error;
      return undefined;
    },
  );
  if (running === undefined) {
    try {
      await engine.createContainer({
        name: ANCHOR_NAME,
        Image: spec.image,
        // A loop of the shell's own sleep: the image's entrypoint would start a gateway.
        Entrypoint: ["sh", "-c", "while :; do sleep 3600; done"],
        Cmd: [],
        User: "1000:1000",
        Healthcheck: { Test: ["NONE"] }, // the image's own checks a gateway
        Labels: { [LABELS.managed]: "1", [LABELS.role]: ANCHOR_ROLE },
        HostConfig: {
          NetworkMode: spec.network,
          CapDrop: ["ALL"],
          SecurityOpt: ["no-new-privileges"],
          ReadonlyRootfs: true,
          Memory: 32 * 1024 * 1024,
          PidsLimit: 16,
          RestartPolicy: { Name: "unless-stopped" },
        },
      });
    } catch (error) {
      if (statusOf(error) !== 409) throw error; // made by a concurrent caller
    }
  }
  if (!running) {
    await container.start().catch((error: unknown) => {
      if (statusOf(error) !== 304) throw error; // started by a concurrent caller
    });
  }
  return ANCHOR_NAME;
}

/** Connects a container to an overlay under `alias`; false when it was on it already. */
async function connect(
  engine: Docker,
  overlay: string,
  container: string,
  alias: string,
  address?: string,
) {
  try {
    await engine.getNetwork(overlay).connect({
      Container: container,
      EndpointConfig: {
        Aliases: alias ? [alias] : [],
        ...(address ? { IPAMConfig: { IPv4Address: address } } : {}),
      },
    });
    return true;
  } catch (error) {
    if (/already exists|already attached/i.test(messageOf(error))) return false;
    throw new Error(`connecting ${container} to ${overlay}: ${messageOf(error)}`, {
      cause: error,
    });
  }
}

/**
 * Connects the anchor to a new overlay: the manager answers "no such network" for a moment
 * after creating one (seconds on a loaded manager), and a busy manager's attachment can end in
 * "context deadline exceeded" (a full CI run), so both are retried for up to three minutes (a
 * full CI run's manager on two cores was still refusing after one).
 */
async function connectAnchor(engine: Docker, overlay: string, anchor: string): Promise<void> {
  const deadline = Date.now() + 180_000;
  for (let delay = 100; ; delay = Math.min(delay * 2, 1_000)) {
    try {
      await connect(engine, overlay, anchor, "");
      return;
    } catch (error) {
      if (
        !/no such network|not found|deadline exceeded/i.test(messageOf(error)) ||
        Date.now() > deadline
      ) {
        throw error;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

/** What attachPlatform hands out on one split overlay. */
interface OverlayPlan {
  hostAddress: string;
  /** No running container holds the host address. */
  hostFree: boolean;
  free: string[];
}

/**
 * Connects every running platform container on the given engines to each overlay it is not on
 * yet, after the node's anchor (above); on a split overlay, a container whose alias is
 * `hostAlias` takes the host address while it is free, and when none took it, one already on
 * the overlay is moved to it (its connections to that gateway are cut once). Returns how many
 * connections were made. A node that does not answer is skipped (the next reconcile connects
 * its containers).
 */
export async function attachPlatform(
  engines: Docker[],
  overlays: string[],
  anchor: AnchorSpec | undefined,
  hostAlias?: string,
): Promise<number> {
  let made = 0;
  const plans = new Map<string, OverlayPlan | undefined>();
  const planOf = async (overlay: string) => {
    if (!plans.has(overlay)) {
      const subnet = await subnetSeenBy(engines, overlay);
      if (!subnet) plans.set(overlay, undefined);
      else {
        const used = await addressesInUse(engines, overlay);
        const [hostAddress = "", ...rest] = platformAddresses(subnet);
        plans.set(overlay, {
          hostAddress,
          hostFree: !used.has(hostAddress),
          free: rest.filter((a) => !used.has(a)),
        });
      }
    }
    return plans.get(overlay);
  };
  /** The next address on an overlay for a container of `alias`; none: the node picks. */
  const nextAddress = async (overlay: string, alias: string) => {
    const plan = await planOf(overlay);
    if (!plan) return undefined;
    if (hostAlias && alias === hostAlias && plan.hostFree) {
      plan.hostFree = false;
      return plan.hostAddress;
    }
    const address = plan.free.shift();
    if (!address) throw new Error(`no platform address left on network ${overlay}`);
    return address;
  };
  /** Containers of hostAlias on each overlay, to move onto a host address nobody took. */
  const hostCandidates = new Map<string, Array<{ engine: Docker; id: string }>>();
  for (const engine of engines) {
    const containers = await platformContainers(engine).catch(() => []);
    if (containers.length === 0) continue;
    const anchored = anchor ? await ensureAnchor(engine, anchor) : undefined;
    const anchorOn = anchored
      ? new Set(
          Object.keys((await engine.getContainer(anchored).inspect()).NetworkSettings.Networks),
        )
      : new Set<string>();
    for (const overlay of overlays) {
      if (anchored && !anchorOn.has(overlay)) await connectAnchor(engine, overlay, anchored);
      for (const container of containers) {
        if (container.networks.has(overlay)) {
          if (container.alias === hostAlias) {
            const list = hostCandidates.get(overlay) ?? [];
            list.push({ engine, id: container.id });
            hostCandidates.set(overlay, list);
          }
          continue;
        }
        try {
          const address = await nextAddress(overlay, container.alias);
          if (await connect(engine, overlay, container.id, container.alias, address)) made++;
        } catch (error) {
          // The container stopped or went (a replaced web replica: its successor is connected
          // by the next reconcile).
          if (!/No such container|not running/i.test(messageOf(error))) throw error;
        }
      }
    }
  }
  if (!hostAlias) return made;
  for (const overlay of overlays) {
    const plan = await planOf(overlay);
    if (!plan?.hostFree) continue;
    for (const { engine, id } of hostCandidates.get(overlay) ?? []) {
      try {
        await engine.getNetwork(overlay).disconnect({ Container: id, Force: true });
        await connect(engine, overlay, id, hostAlias, plan.hostAddress);
        plan.hostFree = false;
        made++;
        break;
      } catch (error) {
        if (!/No such container|not running|is not connected/i.test(messageOf(error))) throw error;
      }
    }
  }
  return made;
}

/** Disconnects the platform containers and the anchor on the given engines from the overlay. */
async function detachPlatform(engines: Docker[], overlay: string): Promise<void> {
  for (const engine of engines) {
    const containers = await platformContainers(engine).catch(() => []);
    const ids = [
      ...containers.filter((c) => c.networks.has(overlay)).map((c) => c.id),
      ANCHOR_NAME,
    ];
    for (const id of ids) {
      await engine
        .getNetwork(overlay)
        .disconnect({ Container: id, Force: true })
        .catch((error: unknown) => {
          if (!/is not connected|No such|not found/i.test(messageOf(error))) throw error;
        });
    }
  }
}

/**
 * Removes a gateway's overlay: the platform's containers leave it first (an overlay with a
 * container on it cannot go). The swarm releases a detached container's attachment, and a
 * removed service's tasks, a moment later: "in use" is retried, and the removal waited for, up
 * to `waitMs`. A missing overlay is fine.
 */
export async function removeOverlay(
  docker: Docker,
  call: Call,
  engines: Docker[],
  name: string,
  waitMs: number,
): Promise<void> {
  await detachPlatform(engines, name);
  const deadline = Date.now() + waitMs;
  let delay = 100;
  for (;;) {
    try {
      // The manager may accept the removal while tasks that were on it are still released:
      // done once the overlay is gone from its list.
      await call(() => docker.getNetwork(name).remove());
      await call(() => docker.getNetwork(name).inspect());
    } catch (error) {
      // A manager that removed it meanwhile answers 500 "network … not found".
      if (statusOf(error) === 404 || /network \S+ not found/i.test(messageOf(error))) return;
      if (error instanceof RuntimeUnavailableError || Date.now() > deadline) throw error;
      if (!/in use|active endpoints/i.test(messageOf(error))) throw error;
    }
    if (Date.now() > deadline) throw new Error(`network ${name} is still there after its removal`);
    await new Promise((resolve) => setTimeout(resolve, delay));
    delay = Math.min(delay * 2, 1_000);
  }
}

/** The overlays carrying every given label (createdAt: ISO 8601). */
export async function listOverlays(
  docker: Docker,
  call: Call,
  labels: Record<string, string>,
): Promise<Array<{ name: string; createdAt: string }>> {
  const filters = {
    label: Object.entries(labels).map(([k, v]) => `${k}=${v}`),
    driver: ["overlay"],
  };
  const found = await call(() => docker.listNetworks({ filters }));
  return found.map((n) => ({ name: n.Name, createdAt: (n as { Created?: string }).Created ?? "" }));
}

/** Network names by id (a service spec names its networks by id). */
export async function networkNames(docker: Docker, call: Call): Promise<Map<string, string>> {
  const all = await call(() => docker.listNetworks());
  return new Map(all.map((n) => [n.Id, n.Name]));
}
