import { isIP } from "node:net";
import path from "node:path";
import { env } from "../../app/server/platform/env.server.ts";
import { DockerRuntime } from "./docker.ts";
import { openclawVersionOf, resolveOpenclaw } from "./openclaw-install.ts";
import { ProcessRuntime } from "./process.ts";
import { SwarmRuntime } from "./swarm.ts";
import type { AgentRuntime } from "./types.ts";

export { DockerRuntime } from "./docker.ts";
export { ProcessRuntime } from "./process.ts";
export { SwarmRuntime } from "./swarm.ts";
export * from "./types.ts";

let runtime: AgentRuntime | undefined;
/** A driver set with setRuntime (tests) is kept by selectRuntime. */
let chosenByCaller = false;

export function processRuntime(root = path.resolve(env().DATA_DIR, "runtime")): ProcessRuntime {
  return new ProcessRuntime({
    root,
    resolveOpenclaw,
    versionOf: openclawVersionOf,
  });
}

/** The name in the AI URL gateways call, unless it is an address (then no hosts entry is needed). */
function platformHostOf(url: string | undefined): string | undefined {
  const host = url ? new URL(url).hostname : undefined;
  return host && !isIP(host.replace(/^\[|\]$/g, "")) ? host : undefined;
}

/**
 * The process's runtime driver. RUNTIME_DRIVER=docker, swarm or process forces one; auto (default)
 * is Docker, and the worker's boot switches to the process driver when no engine answers
 * (selectRuntime).
 */
export function getRuntime(): AgentRuntime {
  const {
    RUNTIME_DRIVER,
    RUNTIME_MAX_CPUS,
    RUNTIME_TENANT_SUBNETS,
    SWARM_NODE_ENGINES,
    RUNTIME_PLATFORM_AI_URL,
    RUNTIME_NETWORK,
    AGENT_GATEWAY_IMAGE,
    GATEWAY_HEALTH_TIMEOUT_MS,
  } = env();
  if (RUNTIME_DRIVER === "swarm" && !RUNTIME_PLATFORM_AI_URL) {
    // On an overlay network no address of this host is the platform's: name it.
    throw new Error(
      "RUNTIME_DRIVER=swarm needs RUNTIME_PLATFORM_AI_URL (the platform's AI endpoint as gateways on the overlay network reach it, e.g. http://web:3000/api/ai/v1)",
    );
  }
  runtime ??=
    RUNTIME_DRIVER === "process"
      ? processRuntime()
      : RUNTIME_DRIVER === "swarm"
        ? new SwarmRuntime({
            maxCpus: RUNTIME_MAX_CPUS,
            nodeEngines: SWARM_NODE_ENGINES,
            // Each gateway on an overlay of its own, shared with the platform's containers only
            // (decision 0201). Every node holds the gateway image; the anchor only sleeps in it.
            isolateGateways: true,
            anchor: { image: AGENT_GATEWAY_IMAGE, network: RUNTIME_NETWORK },
            tenantSubnets: RUNTIME_TENANT_SUBNETS,
            // The web containers labelled with this alias hold the address this name has in
            // every gateway's hosts file (deploy/stack.yml labels them).
            platformHost: platformHostOf(RUNTIME_PLATFORM_AI_URL),
            bootBoundMs: GATEWAY_HEALTH_TIMEOUT_MS,
          })
        : new DockerRuntime({ maxCpus: RUNTIME_MAX_CPUS, tenantSubnets: RUNTIME_TENANT_SUBNETS });
  return runtime;
}

/**
 * Picks the driver at worker boot: with RUNTIME_DRIVER=auto, Docker when its engine answers,
 * else (outside production) the process driver. Returns the driver and why it was chosen.
 */
export async function selectRuntime(): Promise<{ runtime: AgentRuntime; reason: string }> {
  const { RUNTIME_DRIVER, NODE_ENV } = env();
  if (runtime && chosenByCaller) return { runtime, reason: "set by the caller" };
  if (RUNTIME_DRIVER !== "auto") {
    return { runtime: getRuntime(), reason: `RUNTIME_DRIVER=${RUNTIME_DRIVER}` };
  }
  const docker = new DockerRuntime({
    maxCpus: env().RUNTIME_MAX_CPUS,
    tenantSubnets: env().RUNTIME_TENANT_SUBNETS,
  });
  try {
    await docker.ping();
    runtime = docker;
    return { runtime: docker, reason: "the Docker engine answers" };
  } catch (error) {
    if (NODE_ENV === "production") {
      runtime = docker;
      return {
        runtime: docker,
        reason: `the Docker engine does not answer (${(error as Error).message}); production never falls back to the process driver`,
      };
    }
    runtime = processRuntime();
    return {
      runtime,
      reason: `the Docker engine does not answer (${(error as Error).message}): gateways run as local processes`,
    };
  }
}

/** Tests swap the driver (e.g. one pointed at a dead socket). */
export function setRuntime(next: AgentRuntime | undefined): void {
  runtime = next;
  chosenByCaller = next !== undefined;
}
