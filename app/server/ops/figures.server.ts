import { runtimeDeployment } from "../agents/engine-health.server.ts";
import { db } from "../platform/db.server.ts";

// The platform's state as figures, one query each: what the operator console's overview shows
// and what Prometheus scrapes (ops/prometheus.server.ts). Database facts, so every web and
// worker process reports the same numbers without sharing anything (docs/decisions/0202).
// Never a user, email or agent id: counts and sums by bounded keys only.

export interface InstanceFigure {
  state: string;
  /** The node the gateway runs on (a multi-node runtime), "" on a single engine. */
  node: string;
  count: number;
  memoryBytes: number;
  cpuPercent: number;
  oomKills: number;
}

/** Instances (hosted agents' gateways) by lifecycle state and node, with their last samples. */
export async function instanceFigures(): Promise<InstanceFigure[]> {
  const rows = await db()<
    {
      state: string;
      node: string;
      count: number;
      memory: number;
      cpu: number;
      oom: number;
    }[]
  >`
    select i.observed_state as state, coalesce(n.hostname, '') as node, count(*)::int as count,
      coalesce(sum(i.memory_bytes), 0)::float8 as memory,
      coalesce(sum(i.cpu_percent), 0)::float8 as cpu,
      coalesce(sum(i.oom_kills), 0)::int as oom
    from instances i
    left join lateral (
      select rn.hostname from runtime_nodes rn
      where rn.deployment = ${runtimeDeployment()}
        and rn.instances @> jsonb_build_array(jsonb_build_object('instanceId', i.id))
      limit 1) n on true
    group by 1, 2 order by 1, 2`;
  return rows.map((r) => ({
    state: r.state,
    node: r.node,
    count: r.count,
    memoryBytes: r.memory,
    cpuPercent: r.cpu,
    oomKills: r.oom,
  }));
}

export interface LedgerFigures {
  /** Sum of every credit_ledger entry (grants, purchases, usage debits). */
  ledgerMicroUsd: number;
  /** Sum of the accounts' balances, which a trigger keeps equal to the ledger's. */
  balancesMicroUsd: number;
  /** Held for calls under way. */
  heldMicroUsd: number;
  /** Charged beyond balances (recorded, not collected). */
  uncollectedMicroUsd: number;
}

/** The credit ledger's totals; ledger − balances is its drift (0 unless something is wrong). */
export async function ledgerFigures(): Promise<LedgerFigures> {
  const [row] = await db()<
    { ledger: number; balances: number; held: number; uncollected: number }[]
  >`
    select (select coalesce(sum(amount_micro_usd), 0) from credit_ledger)::float8 as ledger,
      (select coalesce(sum(balance_micro_usd), 0) from ai_accounts)::float8 as balances,
      (select coalesce(sum(held_micro_usd), 0) from ai_accounts)::float8 as held,
      (select coalesce(sum(uncollected_micro_usd), 0) from ai_usage)::float8 as uncollected`;
  return {
    ledgerMicroUsd: row?.ledger ?? 0,
    balancesMicroUsd: row?.balances ?? 0,
    heldMicroUsd: row?.held ?? 0,
    uncollectedMicroUsd: row?.uncollected ?? 0,
  };
}

export interface BackupFigures {
  /** Backups by status (pending, ready, failed). */
  byStatus: Record<string, number>;
  /** Agents with a ready backup. */
  agentsBackedUp: number;
  /** Age of the oldest among each agent's newest ready backup (null: none has one). */
  oldestNewestAgeSeconds: number | null;
}

/** Backups by outcome, and how old the stalest agent's newest backup is (no agent named). */
export async function backupFigures(): Promise<BackupFigures> {
  const [row] = await db()<
    { by_status: Record<string, number> | null; agents: number; oldest: number | null }[]
  >`
    with newest as (
      select b.agent_id, max(b.completed_at) as at from agent_backups b
      join agents a on a.id = b.agent_id
      where b.status = 'ready' group by b.agent_id)
    select
      (select json_object_agg(status, n) from (
        select status, count(*)::int as n from agent_backups group by status) s) as by_status,
      (select count(*)::int from newest) as agents,
      (select extract(epoch from now() - min(at))::float8 from newest) as oldest`;
  return {
    byStatus: { pending: 0, ready: 0, failed: 0, ...(row?.by_status ?? {}) },
    agentsBackedUp: row?.agents ?? 0,
    oldestNewestAgeSeconds: row?.oldest ?? null,
  };
}

export interface EngineFigures {
  /** The engine as the workers last saw it (null: never checked). */
  engineUp: boolean | null;
  /** Seconds since a worker last checked it (stale: no worker is checking). */
  engineCheckedAgeSeconds: number | null;
  /** Each node of a multi-node runtime: up when its scheduler calls it ready. */
  nodes: Array<{ node: string; up: boolean; availability: string }>;
}

/** Engine and node health, as the workers' checks recorded them. */
export async function engineFigures(): Promise<EngineFigures> {
  const deployment = runtimeDeployment();
  const rows = await db()<
    { kind: string; name: string; up: boolean; availability: string; age: number }[]
  >`
    select 'engine' as kind, '' as name, reachable as up, '' as availability,
      extract(epoch from now() - checked_at)::float8 as age
    from runtime_engines where deployment = ${deployment}
    union all
    select 'node', hostname, state = 'ready', availability, 0
    from runtime_nodes where deployment = ${deployment}`;
  const engine = rows.find((r) => r.kind === "engine");
  return {
    engineUp: engine ? engine.up : null,
    engineCheckedAgeSeconds: engine ? engine.age : null,
    nodes: rows
      .filter((r) => r.kind === "node")
      .map((r) => ({ node: r.name, up: r.up, availability: r.availability })),
  };
}
