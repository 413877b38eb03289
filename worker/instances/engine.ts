import { runtimeDeployment } from "../../app/server/agents/engine-health.server.ts";
import type { InstanceRow } from "../../app/server/agents/instances.server.ts";
import { GatewayUnavailableError } from "../../app/server/openclaw/errors.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { logger } from "../../app/server/platform/logger.server.ts";
import { currentJob } from "../jobs/context.ts";
import {
  type AgentRuntime,
  type ContainerInfo,
  gatewayEndpoint,
  getRuntime,
  LABELS,
  NoCapacityError,
  RuntimeUnavailableError,
} from "../runtime/index.ts";
import { ensureAiRelay } from "./ai-relay.ts";

// What every instance operation shares: the runtime, this deployment's label, where a gateway
// listens and keeps its state, and how a failure is classed. Operations are idempotent (they
// look before they create; containers are keyed by the instance's name) and run under the
// instance's lock (lock.ts), so two deliveries of a job never act at once.

export const GATEWAY_PORT = 18789;
export const STATE_DIR = "/home/node/.openclaw";
export const CONFIG_PATH = `${STATE_DIR}/openclaw.json`;

/** Label telling this platform's objects apart from another deployment's on the same engine. */
export const DEPLOYMENT_LABEL = "agent-platform.deployment";
export const deployment = runtimeDeployment;

export const deploymentLabels = (): Record<string, string> => ({
  [DEPLOYMENT_LABEL]: deployment(),
});

/** Labels of an instance's volumes (state and snapshot). */
export const volumeLabels = (row: { id: string; user_id: string }): Record<string, string> => ({
  [LABELS.instanceId]: row.id,
  [LABELS.userId]: row.user_id,
  ...deploymentLabels(),
});

/**
 * Labels of an object a job creates for an instance: the deployment, the instance, and the job
 * and attempt it was created by, so reconcile can tell what a dead job left behind.
 */
export function ownerLabels(instanceId?: string): Record<string, string> {
  const job = currentJob();
  return {
    ...deploymentLabels(),
    ...(instanceId ? { [LABELS.instanceId]: instanceId } : {}),
    ...(job
      ? {
          [LABELS.job]: job.name,
          [LABELS.jobId]: job.id,
          [LABELS.jobAttempt]: String(job.retryCount),
        }
      : {}),
  };
}

export const rt = (): AgentRuntime => getRuntime();

/** The image an instance runs: its pinned id, else its tag, else the configured one. */
export const instanceImage = (row: Partial<Pick<InstanceRow, "image" | "image_id">>) =>
  row.image_id ?? row.image ?? env().AGENT_GATEWAY_IMAGE;

/** The container's process exists: running, or frozen by a sleep (decision 0178). */
export const isUp = (info: ContainerInfo | undefined): info is ContainerInfo =>
  info?.running === true || info?.state === "paused";

const ensuring = new Map<string, Promise<{ gatewayIp: string | undefined }>>();

/**
 * The shared network (created when missing); its gateway IP is how containers reach us (from
 * their own networks too: it is an address of this host).
 * Concurrent calls in one process share one attempt: Docker 20.10's CheckDuplicate is racy,
 * and two creates at once left two networks of one name ("network … is ambiguous").
 */
export function ensureNetwork(): Promise<{ gatewayIp: string | undefined }> {
  const name = env().RUNTIME_NETWORK;
  let attempt = ensuring.get(name);
  if (!attempt) {
    attempt = (async () => {
      const network = await rt().ensureNetwork(name, deploymentLabels());
      await ensureAiRelay(network.gatewayIp);
      return network;
    })().finally(() => ensuring.delete(name));
    ensuring.set(name, attempt);
  }
  return attempt;
}

/** The network of the gateway named `containerName`, alone on it (decision 0195). */
export const gatewayNetworkName = (containerName: string) => `${containerName}-net`;

/** The role label of a gateway's own network (reconcile sweeps those left without one). */
export const GATEWAY_NETWORK_ROLE = "gateway-network";

/**
 * Creates the gateway's own network when missing and returns the network its container joins:
 * that one, or the shared one where the driver has no isolated networks (process, and Swarm
 * unless its isolateGateways option is on: decision 0201).
 */
export async function ensureGatewayNetwork(
  containerName: string,
  instanceId?: string,
): Promise<string> {
  const runtime = rt();
  if (!runtime.ensureIsolatedNetwork) return env().RUNTIME_NETWORK;
  const name = gatewayNetworkName(containerName);
  await runtime.ensureIsolatedNetwork(name, {
    ...ownerLabels(instanceId),
    [LABELS.role]: GATEWAY_NETWORK_ROLE,
  });
  return name;
}

/** Removes the gateway's own network (after its container; a missing one is fine). */
export async function removeGatewayNetwork(containerName: string): Promise<void> {
  await rt().removeNetwork?.(gatewayNetworkName(containerName));
}

export const log = () => logger().child({ area: "instances" });

export function gatewayAddress(info: ContainerInfo | undefined): string | undefined {
  return gatewayEndpoint(info, GATEWAY_PORT);
}

/** Is this failure "no node has room" (503)? */
export const isNoCapacity = (error: unknown): boolean => error instanceof NoCapacityError;

/** Is this failure "the backend did not answer" (502) rather than an internal error (500)? */
export function isUnavailable(error: unknown): boolean {
  return error instanceof RuntimeUnavailableError || error instanceof GatewayUnavailableError;
}
