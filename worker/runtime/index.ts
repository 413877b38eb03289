import { env } from "../../app/server/platform/env.server.ts";
import { DockerRuntime } from "./docker.ts";
import type { AgentRuntime } from "./types.ts";

export { DockerRuntime } from "./docker.ts";
export * from "./types.ts";

let runtime: AgentRuntime | undefined;

/** The process's runtime driver (Docker; the socket from DOCKER_SOCKET or the default). */
export function getRuntime(): AgentRuntime {
  runtime ??= new DockerRuntime({ maxCpus: env().RUNTIME_MAX_CPUS });
  return runtime;
}

/** Tests swap the driver (e.g. one pointed at a dead socket). */
export function setRuntime(next: AgentRuntime | undefined): void {
  runtime = next;
}
