import { env } from "../../app/server/platform/env.server.ts";
import { type ContainerInfo, LABELS } from "../runtime/index.ts";
import {
  deploymentLabels,
  ensureGatewayNetwork,
  GATEWAY_NETWORK_ROLE,
  gatewayNetworkName,
  log,
  rt,
} from "./engine.ts";

// Reconcile's part of the gateways' own networks (decisions 0195, 0201): a gateway made before
// them, still on the shared network, moves onto its own; a network whose gateway is gone goes;
// on Swarm, a platform container started since (a new web replica) joins every one of them.

/** A network younger than this may belong to a gateway being created (a pool fill's at most). */
const ORPHAN_NETWORK_AFTER_MS = 20 * 60_000;

/**
 * Moves a gateway that is still on the shared network onto a network of its own (it keeps
 * running: it listens on every interface). Returns whether it moved; the caller reads its new
 * address.
 */
export async function isolateGateway(info: ContainerInfo, instanceId: string): Promise<boolean> {
  const runtime = rt();
  const shared = env().RUNTIME_NETWORK;
  if (!runtime.moveToNetwork || !info.networks?.includes(shared)) return false;
  const own = await ensureGatewayNetwork(info.name, instanceId);
  if (own === shared) return false;
  await runtime.moveToNetwork(info.id, shared, own);
  log().info({ instanceId, network: own }, "moved a gateway off the shared network");
  return true;
}

/** Removes this deployment's gateway networks whose container no instance or pool row names. */
export async function removeOrphanNetworks(containerNames: Set<string>): Promise<string[]> {
  const runtime = rt();
  if (!runtime.listNetworks || !runtime.removeNetwork) return [];
  const known = new Set([...containerNames].map(gatewayNetworkName));
  const networks = await runtime.listNetworks({
    [LABELS.role]: GATEWAY_NETWORK_ROLE,
    ...deploymentLabels(),
  });
  const removed: string[] = [];
  for (const { name, createdAt } of networks) {
    if (known.has(name)) continue;
    if (Date.now() - new Date(createdAt).getTime() < ORPHAN_NETWORK_AFTER_MS) continue;
    try {
      await runtime.removeNetwork(name);
      removed.push(name);
    } catch (error) {
      log().warn({ err: error, network: name }, "an orphan gateway network could not be removed");
    }
  }
  if (removed.length) log().warn({ networks: removed }, "reconcile removed orphan networks");
  return removed;
}

/** The pass under way (attachPlatformToGatewayNetworks runs one at a time). */
let attaching: Promise<number> = Promise.resolve(0);

/**
 * Connects the platform's containers started since the gateways' networks were made to them
 * (Swarm: the web reaches a gateway, and the gateway the web's AI endpoint, over the gateway's
 * own overlay). Returns how many connections were made.
 */
export function attachPlatformToGatewayNetworks(): Promise<number> {
  // One pass at a time in a process (reconcile and the platform watch both call it): two would
  // both find an overlay's host address free and move the same web container twice.
  const pass = attaching.then(attachOnce, attachOnce);
  attaching = pass.catch(() => 0);
  return pass;
}

async function attachOnce(): Promise<number> {
  const runtime = rt();
  if (!runtime.attachPlatform) return 0;
  const made = await runtime.attachPlatform({
    [LABELS.role]: GATEWAY_NETWORK_ROLE,
    ...deploymentLabels(),
  });
  if (made) log().info({ connections: made }, "platform containers joined gateway networks");
  return made;
}
