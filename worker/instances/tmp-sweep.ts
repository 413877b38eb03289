import { getInstance, type InstanceRow } from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { log, rt, STATE_DIR } from "./engine.ts";
import { TMP_SWEEP_SCRIPT } from "./tmp-sweep-script.ts";

// OpenClaw's stale temporary folders swept from a running gateway (issue 50, decision 0224):
// some releases leave hundreds of MB of build, update and catalog folders per start, which on
// a limited volume eat the user's storage. Swept when the gateway starts and by the hourly
// `sweep-gateway-tmp` job; stale means unchanged for an hour and held by no process.

/** A folder unchanged this long, and held by no process, is stale. */
export const STALE_MINUTES = 60;
/** OpenClaw's dated logs in its temporary folder are kept this long. */
export const LOG_MINUTES = 7 * 24 * 60;
/** The gateway's temporary folders: the container's /tmp and the state directory's tmp/. */
export const GATEWAY_TMP_ROOTS = ["/tmp", `${STATE_DIR}/tmp`] as const;

/** The command the sweep runs (in the container; its test runs it on a plain folder). */
export function tmpSweepCommand(
  roots: readonly string[],
  minutes = STALE_MINUTES,
  logMinutes = LOG_MINUTES,
): string[] {
  return ["sh", "-c", TMP_SWEEP_SCRIPT, "tmp-sweep", String(minutes), String(logMinutes), ...roots];
}

/** The paths the script says it removed. */
export function parseSwept(stdout: string): string[] {
  return stdout
    .split("\n")
    .filter((line) => line.startsWith("removed "))
    .map((line) => line.slice("removed ".length));
}

/**
 * Sweeps one gateway's temporary folders through `exec` (the process driver's gateways share
 * the host's /tmp, so they are not swept). Returns the removed paths.
 */
export async function sweepGatewayTmp(row: Pick<InstanceRow, "container_name">): Promise<string[]> {
  if (rt().driver === "process") return [];
  const result = await rt().exec(row.container_name, tmpSweepCommand(GATEWAY_TMP_ROOTS), {
    timeoutMs: 60_000,
  });
  if (result.exitCode !== 0) {
    throw new Error(`tmp sweep exited ${result.exitCode}: ${result.stderr.slice(0, 300)}`);
  }
  return parseSwept(result.stdout);
}

/** At a gateway's start: its earlier runs' leftovers go; failures only log (never the start's). */
export function sweepAtStart(row: Pick<InstanceRow, "id" | "container_name">): void {
  sweepGatewayTmp(row).then(
    (removed) => {
      if (removed.length)
        log().info({ instanceId: row.id, removed }, "stale temporary files removed");
    },
    (error: unknown) =>
      log().debug({ err: error, instanceId: row.id }, "tmp sweep at start failed"),
  );
}

/** The periodic pass over every running gateway; returns how many folders it removed. */
export async function sweepAllGatewayTmp(): Promise<number> {
  const ids = await db()<{ id: string }[]>`
    select id from instances where observed_state = 'running'`;
  let removed = 0;
  for (const { id } of ids) {
    const row = await getInstance(id);
    if (row?.observed_state !== "running") continue;
    try {
      const gone = await sweepGatewayTmp(row);
      removed += gone.length;
      if (gone.length)
        log().info({ instanceId: id, removed: gone }, "stale temporary files removed");
    } catch (error) {
      // A gateway that is stopping or frozen now is swept on a later pass.
      log().warn({ err: error, instanceId: id }, "tmp sweep failed");
    }
  }
  return removed;
}
