import { GatewayUnavailableError } from "../../app/server/openclaw/errors.server.ts";
import { gatewayHealthy, gatewayReadiness } from "../../app/server/openclaw/health.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import type { ContainerInfo } from "../runtime/index.ts";
import { gatewayAddress, log, rt } from "./engine.ts";

/**
 * Why the container cannot become healthy any more, if it cannot: it stopped, waits for a
 * restart, or exited with an error and was restarted since `info` was taken. Docker shows a
 * container between restarts as running most of the time (the restarting window is 100 ms at
 * first), so sampling the state alone missed crashes on a loaded host and sat out the bound.
 */
function crashed(info: ContainerInfo, now: ContainerInfo | undefined): string | undefined {
  if (!now?.running || now.state === "restarting") {
    return `exit ${now?.exitCode}${now?.oomKilled ? ", OOMKilled" : ""}`;
  }
  if (now.restartCount > info.restartCount && now.exitCode !== 0) {
    return `exit ${now.exitCode}${now.oomKilled ? ", OOMKilled" : ""}, restarted`;
  }
  return undefined;
}

/**
 * The error for a gateway that stopped before it answered `endpoint`, with its last line of
 * output (the user's own gateway's, which its logs show them anyway): "exit 0" alone said
 * nothing of why a boot ended. The last lines go to the worker's log for operators.
 */
async function stoppedBefore(info: ContainerInfo, endpoint: string, stopped: string) {
  const output = await rt()
    .logs(info.id, { tail: 20 })
    .catch(() => "");
  const lines = output.split("\n").filter((l) => l.trim());
  log().warn(
    { container: info.name, stopped, lastLines: lines },
    `gateway stopped before ${endpoint}`,
  );
  const last = lines.at(-1)?.trim().slice(0, 300);
  return new GatewayUnavailableError(
    `the gateway container stopped before ${endpoint} answered (${stopped})${last ? `; its last output: ${last}` : ""}`,
  );
}

/** Waits for the gateway's /healthz; returns how long it took. */
export async function waitHealthy(
  info: ContainerInfo,
  timeoutMs = env().GATEWAY_HEALTH_TIMEOUT_MS,
) {
  const address = gatewayAddress(info);
  if (!address) throw new GatewayUnavailableError("the container has no network address");
  // Fail early when the container stops or crashes instead of waiting for the whole bound.
  const started = Date.now();
  for (;;) {
    if (await gatewayHealthy(address, 2_000)) return Date.now() - started;
    const stopped = crashed(info, await rt().inspect(info.id));
    if (stopped) throw await stoppedBefore(info, "/healthz", stopped);
    if (Date.now() - started > timeoutMs) {
      throw new GatewayUnavailableError(`no /healthz within ${timeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * waitHealthy, then /readyz: a gateway that migrates its state (an update, a restore of an
 * older version's state) says healthy before it can serve that state. One without /readyz is
 * ready when healthy. Returns how long both took.
 */
export async function waitReady(info: ContainerInfo, timeoutMs = env().GATEWAY_HEALTH_TIMEOUT_MS) {
  const started = Date.now();
  await waitHealthy(info, timeoutMs);
  const address = gatewayAddress(info) as string;
  for (;;) {
    const readiness = await gatewayReadiness(address, 2_000);
    if (readiness !== "not-ready") return Date.now() - started;
    const stopped = crashed(info, await rt().inspect(info.id));
    if (stopped) throw await stoppedBefore(info, "/readyz", stopped);
    if (Date.now() - started > timeoutMs) {
      throw new GatewayUnavailableError(`healthy but not ready (/readyz) within ${timeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}
