import { db } from "../platform/db.server.ts";

// An honest estimate of how long a start-up takes (issue 25, decision 0158): the median of the
// last runs of the same kind that reached `ready` on this installation, per path for
// provisioning (a pooled gateway is adopted in seconds, a cold boot takes about a minute). No
// history, no estimate: nothing is made up.

/** How many recent successful runs the median is taken over. */
export const ESTIMATE_SAMPLE = 20;

export interface RunEstimate {
  /** Median duration, whole seconds (at least 1). */
  seconds: number;
  /** How many recent runs it is the median of. */
  basedOn: number;
  /** For provisioning: the path it is the estimate of. */
  path: "pool" | "cold" | null;
}

/** The path a provisioning not yet begun will most likely take: a ready pooled gateway or not. */
async function likelyPath(): Promise<"pool" | "cold"> {
  const [row] = await db()<{ ready: boolean }[]>`
    select exists (select 1 from gateway_pool where state = 'ready') as ready`;
  return row?.ready ? "pool" : "cold";
}

export async function runEstimate(
  action: string,
  knownPath: "pool" | "cold" | null,
): Promise<RunEstimate | null> {
  const path = action === "provision" ? (knownPath ?? (await likelyPath())) : null;
  const [row] = await db()<{ median_ms: number | null; n: number }[]>`
    select percentile_cont(0.5) within group (order by ms) as median_ms, count(*)::int as n
    from (
      select extract(epoch from finished_at - started_at) * 1000 as ms from instance_runs
      where outcome = 'ready' and action = ${action}
        and path is not distinct from ${path}
      order by finished_at desc limit ${ESTIMATE_SAMPLE}
    ) recent`;
  if (!row?.n || row.median_ms === null) return null;
  return { seconds: Math.max(1, Math.round(row.median_ms / 1000)), basedOn: row.n, path };
}
