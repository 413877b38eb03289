import type { InstanceRow } from "../../app/server/agents/instances.server.ts";
import { CHAT_TIMEOUT_MS } from "../../app/server/agents/talk.server.ts";
import { turnsRunningOn } from "../../app/server/agents/turn-budget.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import type { ContainerInfo } from "../runtime/index.ts";

// A hung boot (decision 0253): the gateway's container runs, but its gateway has not answered
// /healthz once since the container started. Nothing restarted such a gateway: the row said
// `starting` for ever (issue 52's soak: agents still booting 12 minutes after the last fault).
// It counts as hung only well past the boot bound, only if no observation saw it answer since
// its start (a gateway that answered once and is slow now is busy, not hung), and only while no
// chat turn runs on it.

/** How many boot bounds (GATEWAY_HEALTH_TIMEOUT_MS) a boot may take before it counts as hung. */
export const HUNG_AFTER_BOUNDS = 2;

/** Why the observed gateway counts as a hung boot; undefined when it does not. */
export async function hungBoot(
  row: InstanceRow,
  info: ContainerInfo,
  now = Date.now(),
): Promise<string | undefined> {
  if (!info.running || !info.startedAt || row.health === "healthy") return undefined;
  if (row.desired_state !== "running" || row.observed_state === "sleeping") return undefined;
  const started = new Date(info.startedAt).getTime();
  const ranMs = now - started;
  if (ranMs < HUNG_AFTER_BOUNDS * env().GATEWAY_HEALTH_TIMEOUT_MS) return undefined;
  if (row.healthy_at && row.healthy_at.getTime() >= started) return undefined;
  if ((await turnsRunningOn(row.id, CHAT_TIMEOUT_MS)) > 0) return undefined;
  return `the gateway has not answered /healthz in the ${Math.round(ranMs / 1000)} s since it started`;
}
