import { freemem } from "node:os";
import { env } from "../../app/server/platform/env.server.ts";
import { log, rt } from "./engine.ts";

// How many warm gateways this worker keeps (decision 0159). RUNTIME_POOL_SIZE, when set, always
// wins (0 turns the pool off). Unset, one gateway is kept when the driver is Docker and the host
// has at least POOL_DEFAULT_MIN_FREE_GIB of memory available when the worker starts, so a new
// installation's first agent answers in seconds; otherwise none. Decided once per process: a
// pool that came and went with the free memory of the moment would only churn gateways.

export const POOL_DEFAULT_MIN_FREE_GIB = 4;

let decided: number | undefined;

export function poolSize(): number {
  const configured = env().RUNTIME_POOL_SIZE;
  if (configured !== undefined) return configured;
  if (decided === undefined) {
    const freeGib = freemem() / 2 ** 30;
    const driver = rt().driver;
    decided = driver === "docker" && freeGib >= POOL_DEFAULT_MIN_FREE_GIB ? 1 : 0;
    log().info(
      { driver, freeGib: Math.round(freeGib * 10) / 10, poolSize: decided },
      "warm pool size chosen (RUNTIME_POOL_SIZE unset)",
    );
  }
  return decided;
}

/** Tests: forget the decision. */
export function resetPoolSize(): void {
  decided = undefined;
}
