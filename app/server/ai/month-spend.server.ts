import { db } from "../platform/db.server.ts";

// An owner's model spend since the start of the current UTC month (the mission-control view,
// decision 0207): the ai_usage rows it owns, as metered, whoever or whatever made the calls.

export interface MonthSpend {
  /** The start of the month counted, ISO (UTC). */
  since: string;
  /** The calls' cost in micro-USD (as usage.server.ts reports it). */
  costMicroUsd: number;
  calls: number;
}

export async function monthSpend(ownerId: string, now = new Date()): Promise<MonthSpend> {
  const since = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const [row] = await db()<{ cost: string; calls: number }[]>`
    select coalesce(sum(cost_micro_usd), 0)::bigint as cost, count(*)::int as calls
    from ai_usage where user_id = ${ownerId} and created_at >= ${since}`;
  return {
    since: since.toISOString(),
    costMicroUsd: Number(row?.cost ?? 0),
    calls: row?.calls ?? 0,
  };
}
