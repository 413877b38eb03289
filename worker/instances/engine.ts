import { GatewayUnavailableError } from "../../app/server/openclaw/errors.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { logger } from "../../app/server/platform/logger.server.ts";
import {
  type AgentRuntime,
  type ContainerInfo,
  gatewayEndpoint,
  getRuntime,
  LABELS,
  RuntimeUnavailableError,
} from "../runtime/index.ts";

// What every instance operation shares: the runtime, this deployment's label, where a gateway
// listens and keeps its state, and how a failure is classed. Operations are idempotent (they
// look before they create; containers are keyed by the instance's name) and run under the
// instance's lock (lock.ts), so two deliveries of a job never act at once.

export const GATEWAY_PORT = 18789;
export const STATE_DIR = "/home/node/.openclaw";
export const CONFIG_PATH = `${STATE_DIR}/openclaw.json`;

/** Label telling this platform's objects apart from another deployment's on the same engine. */
export const DEPLOYMENT_LABEL = "agent-platform.deployment";
export const deployment = () => process.env.RUNTIME_DEPLOYMENT || "default";

export const deploymentLabels = (): Record<string, string> => ({
  [DEPLOYMENT_LABEL]: deployment(),
});

/** Labels of an instance's volumes (state and snapshot). */
export const volumeLabels = (row: { id: string; user_id: string }): Record<string, string> => ({
  [LABELS.instanceId]: row.id,
  [LABELS.userId]: row.user_id,
  ...deploymentLabels(),
});

export const rt = (): AgentRuntime => getRuntime();

/** The gateways' network (created when missing); its gateway IP is how containers reach us. */
export function ensureNetwork() {
  return rt().ensureNetwork(env().RUNTIME_NETWORK, deploymentLabels());
}

export const log = () => logger().child({ area: "instances" });

export function gatewayAddress(info: ContainerInfo | undefined): string | undefined {
  return gatewayEndpoint(info, GATEWAY_PORT);
}

/** Is this failure "the backend did not answer" (502) rather than an internal error (500)? */
export function isUnavailable(error: unknown): boolean {
  return error instanceof RuntimeUnavailableError || error instanceof GatewayUnavailableError;
}
