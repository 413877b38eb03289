import { beforeAll, describe, expect, it } from "vitest";
import { opsOverview } from "../../app/server/ops/overview.server.ts";
import { registerDatabaseGauges } from "../../app/server/ops/prometheus.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { sendJob } from "../../app/server/platform/jobs.server.ts";
import { registry } from "../../app/server/platform/metrics/registry.server.ts";
import { ensureUser } from "../helpers/users.ts";
import { sample, seriesCount } from "./support.ts";

// The database facts as gauges (issue 51): computed at each scrape from one query per group,
// labelled by bounded keys only — more users and agents change values, never the series.

async function instanceFor(n: string, state: string, memory = 0, oomKills = 0) {
  await ensureUser(`usr_gauge_${n}`);
  await db()`insert into instances (id, user_id, container_name, volume_name,
      gateway_token_sealed, observed_state, memory_bytes, cpu_percent, oom_kills)
    values (${`ins_gauge_${n}`}, ${`usr_gauge_${n}`}, ${`c_${n}`}, ${`v_${n}`}, 'sealed',
      ${state}, ${memory}, 1.5, ${oomKills})`;
}

async function agentFor(n: string) {
  await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
    values (${`agt_gauge_${n}`}, ${`usr_gauge_${n}`}, 'A', 'main', 'openai/gpt-4o', 'starter')`;
}

beforeAll(() => registerDatabaseGauges());

describe("database gauges", () => {
  it("count instances by state and sum their last samples", async () => {
    await instanceFor("a", "running", 1000);
    await instanceFor("b", "running", 500, 2);
    await instanceFor("c", "sleeping");
    expect(await sample("platform_instances", { state: "running", node: "" })).toBe(2);
    expect(await sample("platform_instances", { state: "sleeping" })).toBe(1);
    expect(await sample("platform_gateway_memory_bytes", { node: "" })).toBe(1500);
    expect(await sample("platform_gateway_cpu_percent", { node: "" })).toBe(4.5);
    expect(await sample("platform_gateway_oom_kills")).toBe(2);
    // Read afresh at every scrape.
    await db()`update instances set observed_state = 'oom_killed' where id = 'ins_gauge_b'`;
    expect(await sample("platform_instances", { state: "oom_killed" })).toBe(1);
    expect(await sample("platform_instances", { state: "running" })).toBe(1);
  });

  it("add no series for 100 more users with agents", async () => {
    await registry.metrics();
    const before = await seriesCount();
    for (let i = 0; i < 100; i++) {
      await instanceFor(`many${i}`, "running", 10);
      await agentFor(`many${i}`);
      await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference)
        values (${`led_many${i}`}, ${`usr_gauge_many${i}`}, 1000, 'purchase', ${`many${i}`})`;
    }
    expect(await sample("platform_instances", { state: "running" })).toBe(101);
    expect(await seriesCount()).toBe(before);
    const text = await registry.metrics();
    expect(text).not.toMatch(/usr_|agt_|ins_|@example\.com/);
  });

  it("give the credit ledger's totals, whose drift is zero", async () => {
    const ledger = await sample("platform_credit_ledger_micro_usd");
    expect(ledger).toBe(100 * 1000);
    expect(await sample("platform_credit_balances_micro_usd")).toBe(ledger);
  });

  it("count jobs by queue and state with the oldest due job's wait", async () => {
    await sendJob("send-email", { to: "a@example.com", subject: "s", text: "t" });
    expect(await sample("platform_jobs", { queue: "send-email", state: "created" })).toBe(1);
    // Waited since it was sent (no worker runs in this file).
    await db()`update pgboss.job set start_after = now() - interval '90 seconds',
      created_on = now() - interval '90 seconds' where name = 'send-email'`;
    expect(
      await sample("platform_job_oldest_pending_seconds", { queue: "send-email" }),
    ).toBeGreaterThanOrEqual(90);
    expect(await sample("platform_job_oldest_pending_seconds", { queue: "reconcile" })).toBe(0);
  });

  it("count backups by outcome and age the stalest agent's newest", async () => {
    await agentFor("a");
    await db()`insert into agent_backups (id, user_id, agent_id, reason, status, store,
        object_key, completed_at)
      values ('bkp_g1', 'usr_gauge_a', 'agt_gauge_a', 'scheduled', 'ready', 'local', 'k1',
        now() - interval '3 hours'),
        ('bkp_g2', 'usr_gauge_a', 'agt_gauge_a', 'scheduled', 'failed', 'local', 'k2', now())`;
    expect(await sample("platform_backups", { status: "ready" })).toBe(1);
    expect(await sample("platform_backups", { status: "failed" })).toBe(1);
    expect(await sample("platform_backup_agents")).toBe(1);
    const age = await sample("platform_backup_oldest_newest_age_seconds");
    expect(age).toBeGreaterThanOrEqual(3 * 3600);
    expect(age).toBeLessThan(3 * 3600 + 600);
    // Solo backs up daily: 3 hours is on time. Network backs up hourly: 3 hours is overdue.
    expect(await sample("platform_backup_overdue_agents")).toBe(0);
    await instanceFor("net", "running");
    await db()`update instances set plan = 'network' where id = 'ins_gauge_net'`;
    await agentFor("net");
    await db()`insert into agent_backups (id, user_id, agent_id, reason, status, store,
        object_key, completed_at)
      values ('bkp_g3', 'usr_gauge_net', 'agt_gauge_net', 'scheduled', 'ready', 'local', 'k3',
        now() - interval '3 hours')`;
    expect(await sample("platform_backup_overdue_agents")).toBe(1);
  });

  it("are the figures the operator console's overview shows", async () => {
    const { operations } = await opsOverview();
    expect(operations.backups.overdueAgents).toBe(await sample("platform_backup_overdue_agents"));
    expect(operations.instancesByState.running).toBe(
      await sample("platform_instances", { state: "running" }),
    );
    expect(operations.ledger.ledgerMicroUsd).toBe(await sample("platform_credit_ledger_micro_usd"));
    expect(operations.ledger.driftMicroUsd).toBe(0);
    expect(operations.backups.byStatus.failed).toBe(
      await sample("platform_backups", { status: "failed" }),
    );
    expect(operations.jobsWaiting).toBe(await sample("platform_jobs", { state: "created" }));
  });

  it("report the engine and its nodes as the workers last saw them", async () => {
    await db()`insert into runtime_engines (deployment, reachable, checked_at, changed_at)
      values ('default', false, now() - interval '20 seconds', now())`;
    expect(await sample("platform_engine_up")).toBe(0);
    // Whether gateways outlive an engine restart, as the worker read it (decision 0239).
    await db()`update runtime_engines set live_restore = true where deployment = 'default'`;
    expect(await sample("platform_engine_live_restore")).toBe(1);
    await db()`update runtime_engines set live_restore = false where deployment = 'default'`;
    expect(await sample("platform_engine_live_restore")).toBe(0);
    expect(await sample("platform_engine_check_age_seconds")).toBeGreaterThanOrEqual(20);
    // Volumes whose removal waits for the engine's next restart (decision 0248).
    expect(await sample("platform_engine_volume_removals_deferred")).toBe(0);
    await db()`insert into volume_removals (volume, reason) values ('agent-x-state', 'stuck')`;
    expect(await sample("platform_engine_volume_removals_deferred")).toBe(1);
    expect((await opsOverview()).operations.volumeRemovalsDeferred).toBe(1);
  });
});
