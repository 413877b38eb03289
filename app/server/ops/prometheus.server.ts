import { Gauge } from "prom-client";
import { poolFigures } from "../agents/instances.server.ts";
import { JOB_STATES, jobCounts } from "../platform/jobs.server.ts";
import { logger } from "../platform/logger.server.ts";
import { PREFIX, registry } from "../platform/metrics/registry.server.ts";
import { backupFigures, engineFigures, instanceFigures, ledgerFigures } from "./figures.server.ts";

// The database facts as Prometheus gauges (docs/decisions/0202), computed when /metrics is
// scraped by collect() callbacks over the same functions the operator console's overview reads
// (figures.server.ts): one query per group, shared by that group's gauges within a scrape.
// Imported by the entries (server.ts, worker/index.ts), so web and worker both expose them.

/**
 * `fn`'s answer, shared by every caller while it is being computed: a scrape collects all
 * gauges at once, so each group's query runs once per scrape, and the next scrape runs it anew.
 */
function shared<T>(fn: () => Promise<T>): () => Promise<T | undefined> {
  let pending: Promise<T | undefined> | undefined;
  return () => {
    pending ??= fn()
      .catch((error: unknown) => {
        // A group whose query fails is left out of this scrape (its series go absent).
        logger().warn({ err: error }, "metrics: a database figure could not be read");
        return undefined;
      })
      .finally(() => {
        pending = undefined;
      });
    return pending;
  };
}

const instances = shared(instanceFigures);
const ledger = shared(ledgerFigures);
const backups = shared(backupFigures);
const engine = shared(engineFigures);
const jobs = shared(jobCounts);
const pool = shared(poolFigures);

/** A gauge filled by `fill` from a fresh figure at every scrape. */
function gauge<L extends string, T>(
  name: string,
  help: string,
  labelNames: readonly L[],
  source: () => Promise<T | undefined>,
  fill: (g: Gauge<L>, figures: T) => void,
): Gauge<L> {
  return new Gauge<L>({
    name: `${PREFIX}${name}`,
    help,
    labelNames,
    registers: [registry],
    async collect() {
      const figures = await source();
      this.reset();
      if (figures !== undefined) fill(this, figures);
    },
  });
}

let registered = false;

/** Registers the gauges (once per process). */
export function registerDatabaseGauges(): void {
  if (registered) return;
  registered = true;

  gauge(
    "instances",
    "Agent instances (gateways) by lifecycle state and node",
    ["state", "node"],
    instances,
    (g, rows) => {
      for (const r of rows) g.inc({ state: r.state, node: r.node }, r.count);
    },
  );
  gauge(
    "gateway_memory_bytes",
    "Memory the gateways used at their last sample, summed per node",
    ["node"],
    instances,
    (g, rows) => {
      for (const r of rows) g.inc({ node: r.node }, r.memoryBytes);
    },
  );
  gauge(
    "gateway_cpu_percent",
    "CPU the gateways used at their last sample (100 = one core), summed per node",
    ["node"],
    instances,
    (g, rows) => {
      for (const r of rows) g.inc({ node: r.node }, r.cpuPercent);
    },
  );
  gauge(
    "gateway_oom_kills",
    "OOM kills recorded on the existing instances, summed (rises when one is killed)",
    [],
    instances,
    (g, rows) => {
      g.set(rows.reduce((sum, r) => sum + r.oomKills, 0));
    },
  );

  gauge(
    "jobs",
    "Background jobs by queue and state (pg-boss's table)",
    ["queue", "state"],
    jobs,
    (g, rows) => {
      for (const r of rows)
        for (const state of JOB_STATES) g.set({ queue: r.name, state }, r[state]);
    },
  );
  gauge(
    "job_oldest_pending_seconds",
    "How long each queue's oldest due job has waited (0: none waits)",
    ["queue"],
    jobs,
    (g, rows) => {
      for (const r of rows) g.set({ queue: r.name }, r.oldestPendingSeconds);
    },
  );

  gauge(
    "pool_gateways",
    "Warm pool gateways by state (ready, starting)",
    ["state"],
    pool,
    (g, p) => {
      g.set({ state: "ready" }, p.ready);
      g.set({ state: "starting" }, p.filling);
    },
  );

  gauge("credit_ledger_micro_usd", "Sum of every credit ledger entry", [], ledger, (g, l) =>
    g.set(l.ledgerMicroUsd),
  );
  gauge(
    "credit_balances_micro_usd",
    "Sum of the accounts' balances (equal to the ledger's sum unless it drifted)",
    [],
    ledger,
    (g, l) => g.set(l.balancesMicroUsd),
  );
  gauge("credit_held_micro_usd", "Credits held for AI calls under way", [], ledger, (g, l) =>
    g.set(l.heldMicroUsd),
  );
  gauge(
    "credit_uncollected_micro_usd",
    "AI usage not collected: beyond balances, or reported beyond a call's hold",
    [],
    ledger,
    (g, l) => g.set(l.uncollectedMicroUsd),
  );

  gauge(
    "backups",
    "Agent backups by status (pending, ready, failed)",
    ["status"],
    backups,
    (g, b) => {
      for (const [status, n] of Object.entries(b.byStatus)) g.set({ status }, n);
    },
  );
  gauge(
    "backup_overdue_agents",
    "Agents whose newest ready backup is older than their plan's interval and an hour",
    [],
    backups,
    (g, b) => g.set(b.overdueAgents),
  );
  gauge("backup_agents", "Agents with a ready backup", [], backups, (g, b) =>
    g.set(b.agentsBackedUp),
  );
  gauge(
    "backup_oldest_newest_age_seconds",
    "Age of the stalest agent's newest ready backup",
    [],
    backups,
    (g, b) => {
      if (b.oldestNewestAgeSeconds !== null) g.set(b.oldestNewestAgeSeconds);
    },
  );

  gauge(
    "engine_up",
    "The container engine answered the workers' last check (1) or not (0)",
    [],
    engine,
    (g, e) => {
      if (e.engineUp !== null) g.set(e.engineUp ? 1 : 0);
    },
  );
  gauge(
    "engine_live_restore",
    "The Docker engine keeps gateways running while it restarts (1) or stops them all (0)",
    [],
    engine,
    (g, e) => {
      if (e.engineLiveRestore !== null) g.set(e.engineLiveRestore ? 1 : 0);
    },
  );
  gauge(
    "engine_check_age_seconds",
    "Seconds since a worker last checked the engine",
    [],
    engine,
    (g, e) => {
      if (e.engineCheckedAgeSeconds !== null) g.set(e.engineCheckedAgeSeconds);
    },
  );
  gauge(
    "engine_volume_removals_deferred",
    "State volumes whose removal waits for the engine (it did not answer, or still counts them mounted until it restarts)",
    [],
    engine,
    (g, e) => g.set(e.volumeRemovalsDeferred),
  );
  gauge(
    "node_up",
    "Each node of a multi-node runtime: ready (1) or not (0)",
    ["node", "availability"],
    engine,
    (g, e) => {
      for (const n of e.nodes) g.set({ node: n.node, availability: n.availability }, n.up ? 1 : 0);
    },
  );
}
