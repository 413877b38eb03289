import type { InstanceRow } from "../../app/server/agents/instances.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { type ContainerInfo, limitsForPlan } from "../runtime/index.ts";
import { log, rt } from "./engine.ts";

// A booting gateway's CPU weight (decision 0250). On a host whose gateways are busy chatting, a
// boot with its plan's weight gets a core's share split among them all, and boots after a fault
// took minutes (issue 52's soak: convergence 119 s, goal 60 s). A boot's work is short and a
// user or a restart waits on it, so while it boots it weighs BOOT_CPU_WEIGHT times its plan's;
// once it answers /healthz (or has had its whole health bound) it weighs its plan's again.

/** cgroup v1's largest cpu.shares. */
const MAX_SHARES = 262_144;

const planShares = (row: Pick<InstanceRow, "plan">) => limitsForPlan(row.plan).cpuShares;

/** The weight a gateway of `row`'s plan boots with. */
export function bootShares(row: Pick<InstanceRow, "plan">): number {
  return Math.min(planShares(row) * env().BOOT_CPU_WEIGHT, MAX_SHARES);
}

/**
 * Raises the container's weight for the boot about to start it (before a start or a restart).
 * A refusal is logged and the boot goes on at the plan's weight: the weight only speeds it.
 */
export async function weighForBoot(row: Pick<InstanceRow, "id" | "plan">, containerId: string) {
  const runtime = rt();
  if (!runtime.setCpuShares || env().BOOT_CPU_WEIGHT <= 1) return;
  await runtime.setCpuShares(containerId, bootShares(row)).catch((error: unknown) => {
    log().warn(
      { err: error, instanceId: row.id },
      "boot CPU weight not set; booting at the plan's",
    );
  });
}

/**
 * The plan's weight again for a gateway that weighs more: once it answers /healthz, or once it
 * has run for its whole health bound without answering (a boot that hangs must not keep a
 * neighbour's CPU). Called by every observation, so a worker that died mid-boot leaves no
 * heavy gateway behind for longer than a sampler pass.
 */
export async function settleBootWeight(
  row: Pick<InstanceRow, "id" | "plan">,
  info: ContainerInfo,
  healthy: boolean,
): Promise<void> {
  const runtime = rt();
  const shares = planShares(row);
  if (!runtime.setCpuShares || info.limits.cpuShares <= shares) return;
  const started = info.startedAt ? new Date(info.startedAt).getTime() : 0;
  const overdue = Date.now() - started > env().GATEWAY_HEALTH_TIMEOUT_MS;
  if (info.running && !healthy && !overdue) return;
  await runtime.setCpuShares(info.id, shares).catch((error: unknown) => {
    log().warn({ err: error, instanceId: row.id }, "boot CPU weight not lowered (next pass)");
  });
}
