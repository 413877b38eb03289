import { createHash } from "node:crypto";
import type Docker from "dockerode";
import { LABELS } from "./types.ts";

// The Docker driver's networks (decision 0195). The shared bridge (RUNTIME_NETWORK) holds no
// gateway: it gives the host a stable address where the AI endpoint's relay listens. Each
// gateway sits alone on a bridge of its own, on a subnet the platform picks from a pool of its
// own, with inter-container traffic off: Docker's isolation rules drop traffic between two
// bridges, so no tenant's container reaches another's, and an address on a gateway's network
// can only ever be held by that gateway (no other network may overlap its subnet).

type Call = <T>(fn: () => Promise<T>) => Promise<T>;

const statusOf = (error: unknown) => (error as { statusCode?: number }).statusCode;

/** A pool of IPv4 subnets ("10.213.0.0/16") cut into networks of `prefix` bits. */
export interface SubnetPool {
  base: number;
  /** How many networks of `prefix` bits the pool holds. */
  count: number;
  prefix: number;
}

const toInt = (ip: string) => ip.split(".").reduce((n, octet) => n * 256 + Number(octet), 0) >>> 0;
const toIp = (n: number) => [24, 16, 8, 0].map((shift) => (n >>> shift) & 255).join(".");

/** Parses "a.b.c.d/n" into a pool of /`prefix` networks; throws on a malformed or small range. */
export function subnetPool(cidr: string, prefix = 28): SubnetPool {
  const [, address = "", length = ""] =
    /^(\d{1,3}(?:\.\d{1,3}){3})\/(\d{1,2})$/.exec(cidr.trim()) ?? [];
  const bits = Number(length);
  if (!address || address.split(".").some((o) => Number(o) > 255) || bits > prefix || bits < 8) {
    throw new Error(`tenant subnet pool ${cidr} is not an IPv4 range of /8 to /${prefix}`);
  }
  const mask = (0xffffffff << (32 - bits)) >>> 0;
  return { base: (toInt(address) & mask) >>> 0, count: 2 ** (prefix - bits), prefix };
}

/** The pool's `index`th subnet and its gateway (the host's address on it). */
export function subnetAt(pool: SubnetPool, index: number) {
  const start = (pool.base + index * 2 ** (32 - pool.prefix)) >>> 0;
  return { subnet: `${toIp(start)}/${pool.prefix}`, gateway: toIp(start + 1) };
}

/** Where a name's search for a free subnet starts: spread, and the same on every worker. */
const startIndex = (name: string, count: number) =>
  createHash("sha256").update(name).digest().readUInt32BE(0) % count;

/** How many subnets are tried before giving up (each a refused create: milliseconds). */
const MAX_PROBES = 512;

const overlaps = (error: unknown) =>
  /overlap|already (in use|allocated)/i.test((error as Error).message ?? "");

/**
 * Creates the isolated bridge `name` when missing, on the first free subnet of `pool` from the
 * name's start index; returns its subnet. Another network on a subnet makes the engine refuse
 * it ("Pool overlaps"), and the next one is tried.
 */
export async function ensureIsolatedBridge(
  docker: Docker,
  call: Call,
  name: string,
  labels: Record<string, string>,
  pool: SubnetPool,
): Promise<{ subnet: string }> {
  const existing = await inspectSubnet(docker, call, name);
  if (existing) return { subnet: existing };
  const start = startIndex(name, pool.count);
  for (let probe = 0; probe < Math.min(pool.count, MAX_PROBES); probe++) {
    const { subnet, gateway } = subnetAt(pool, (start + probe) % pool.count);
    try {
      await call(() =>
        docker.createNetwork({
          Name: name,
          Driver: "bridge",
          CheckDuplicate: true,
          Labels: { ...labels, [LABELS.managed]: "1" },
          IPAM: { Driver: "default", Config: [{ Subnet: subnet, Gateway: gateway }] },
          Options: { "com.docker.network.bridge.enable_icc": "false" },
        }),
      );
      return { subnet };
    } catch (error) {
      if (statusOf(error) === 409) break; // created by a concurrent caller
      if (!overlaps(error)) throw error;
    }
  }
  const created = await inspectSubnet(docker, call, name);
  if (created) return { subnet: created };
  throw new Error(`no free subnet for network ${name} in the tenant pool (${pool.count} in all)`);
}

async function inspectSubnet(docker: Docker, call: Call, name: string) {
  try {
    const info = await call(() => docker.getNetwork(name).inspect());
    return (info.IPAM?.Config?.[0]?.Subnet as string | undefined) ?? "";
  } catch (error) {
    if (statusOf(error) === 404) return undefined;
    throw error;
  }
}

/** The shared bridge (created when missing) and its gateway address. */
export async function ensureSharedBridge(
  docker: Docker,
  call: Call,
  name: string,
  labels: Record<string, string>,
): Promise<{ gatewayIp: string | undefined }> {
  const read = async () => {
    const info = await docker.getNetwork(name).inspect();
    return { gatewayIp: info.IPAM?.Config?.[0]?.Gateway as string | undefined };
  };
  try {
    return await call(read);
  } catch (error) {
    if (statusOf(error) !== 404) throw error;
  }
  try {
    await call(() =>
      docker.createNetwork({
        Name: name,
        Driver: "bridge",
        CheckDuplicate: true,
        Labels: { ...labels, [LABELS.managed]: "1" },
      }),
    );
  } catch (error) {
    if (statusOf(error) !== 409) throw error; // created by a concurrent worker
  }
  return call(read);
}

/** Removes a network; a missing one is not an error. */
export async function removeNetwork(docker: Docker, call: Call, name: string): Promise<void> {
  try {
    await call(() => docker.getNetwork(name).remove());
  } catch (error) {
    if (statusOf(error) !== 404) throw error;
  }
}

/** The networks carrying every given label. */
export async function listNetworks(
  docker: Docker,
  call: Call,
  labels: Record<string, string>,
): Promise<Array<{ name: string; createdAt: string }>> {
  const filters = { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) };
  const found = await call(() => docker.listNetworks({ filters }));
  return found.map((n) => ({ name: n.Name, createdAt: (n as { Created?: string }).Created ?? "" }));
}

/** Moves a container onto `to` and off `from` (a gateway keeps running; it listens on all). */
export async function moveContainer(
  docker: Docker,
  call: Call,
  container: string,
  from: string,
  to: string,
): Promise<void> {
  try {
    await call(() => docker.getNetwork(to).connect({ Container: container }));
  } catch (error) {
    // Already connected (a move interrupted between its two steps) is fine.
    if (!/already exists|already attached/i.test((error as Error).message ?? "")) throw error;
  }
  try {
    await call(() => docker.getNetwork(from).disconnect({ Container: container, Force: true }));
  } catch (error) {
    if (!/is not connected|not found|No such/i.test((error as Error).message ?? "")) throw error;
  }
}
