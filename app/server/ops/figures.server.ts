import { BACKUP_PLANS, backupPlan } from "../agents/backup-plans.server.ts";
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
  /** Not collected: beyond balances, or reported by a provider beyond a call's hold. */
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
  /**
   * Agents whose newest ready backup (or, without one, whose creation) is older than their
   * plan's interval and an hour's slack: the schedule is not keeping up.
   */
  overdueAgents: number;
}

/** An hour past its plan's interval, an agent's backup is overdue (the schedule runs hourly). */
export const BACKUP_OVERDUE_SLACK_HOURS = 1;

/** Backups by outcome, how old the stalest agent's newest is, how many are overdue. */
export async function backupFigures(): Promise<BackupFigures> {
  const plans = Object.keys(BACKUP_PLANS);
  const hours = plans.map((p) => backupPlan(p).everyHours + BACKUP_OVERDUE_SLACK_HOURS);
  const fallback = backupPlan(undefined).everyHours + BACKUP_OVERDUE_SLACK_HOURS;
  const [row] = await db()<
    {
      by_status: Record<string, number> | null;
      agents: number;
      oldest: number | null;
      overdue: number;
    }[]
  >`
    with newest as (
      select a.id, a.created_at, i.plan,
        (select max(b.completed_at) from agent_backups b
          where b.agent_id = a.id and b.status = 'ready') as at
      from agents a left join instances i on i.user_id = a.user_id),
    plans as (select * from unnest(${plans}::text[], ${hours}::int[]) as p(plan, hours))
    select
      (select json_object_agg(status, n) from (
        select status, count(*)::int as n from agent_backups group by status) s) as by_status,
      (select count(*)::int from newest where at is not null) as agents,
      (select extract(epoch from now() - min(at))::float8 from newest) as oldest,
      (select count(*)::int from newest n left join plans p on p.plan = n.plan
        where coalesce(n.at, n.created_at)
          < now() - make_interval(hours => coalesce(p.hours, ${fallback}))) as overdue`;
  return {
    byStatus: { pending: 0, ready: 0, failed: 0, ...(row?.by_status ?? {}) },
    agentsBackedUp: row?.agents ?? 0,
    oldestNewestAgeSeconds: row?.oldest ?? null,
    overdueAgents: row?.overdue ?? 0,
  };
}

export interface EngineFigures {
  /** The engine as the workers last saw it (null: never checked). */
  engineUp: boolean | null;
  /** Seconds since a worker last checked it (stale: no worker is checking). */
  engineCheckedAgeSeconds: number | null;
  /** The engine keeps gateways running while it restarts (null: no such setting, or unread). */
  engineLiveRestore: boolean | null;
  /** Each node of a multi-node runtime: up when its scheduler calls it ready. */
  nodes: Array<{ node: string; up: boolean; availability: string }>;
  /** Volumes whose removal waits for the engine: unreachable, or until it restarts (0248). */
  volumeRemovalsDeferred: number;
}

/** Engine and node health, as the workers' checks recorded them. */
export async function engineFigures(): Promise<EngineFigures> {
  const deployment = runtimeDeployment();
  const rows = await db()<
    {
      kind: string;
      name: string;
      up: boolean;
      availability: string;
      /** The engine's check age in seconds; the deferred removals' count. */
      figure: number;
      live_restore: boolean | null;
    }[]
  >`
    select 'engine' as kind, '' as name, reachable as up, '' as availability,
      extract(epoch from now() - checked_at)::float8 as figure, live_restore
    from runtime_engines where deployment = ${deployment}
    union all
    select 'node', hostname, state = 'ready', availability, 0, null
    from runtime_nodes where deployment = ${deployment}
    union all
    select 'deferred', '', true, '', count(*)::float8, null from volume_removals`;
  const engine = rows.find((r) => r.kind === "engine");
  return {
    engineUp: engine ? engine.up : null,
    engineCheckedAgeSeconds: engine ? engine.figure : null,
    engineLiveRestore: engine?.live_restore ?? null,
    nodes: rows
      .filter((r) => r.kind === "node")
      .map((r) => ({ node: r.name, up: r.up, availability: r.availability })),
    volumeRemovalsDeferred: rows.find((r) => r.kind === "deferred")?.figure ?? 0,
  };
}
