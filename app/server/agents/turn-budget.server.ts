import type { Sql, TransactionSql } from "postgres";
import type { TurnAdmission } from "../ai/turns.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { runtimeDeployment } from "./engine-health.server.ts";

// The host's chat-turn budget (decision 0251). A turn costs its gateway seconds of CPU (0154), and
// a host offered more turns than its cores serve queued them on busy gateways until they ran past
// their bounds: issue 52's twenty-agent soak accepted turns it then lost. So at most
// AGENT_TURNS_PER_CPU × the host's CPUs turns run at once on one engine host (on a Swarm, on the
// node the agent's gateway runs on); one more is refused at once with 503 and Retry-After, and
// nothing of it reaches the gateway. One agent instance holds at most half of it, so one tenant
// cannot keep every other one's turns out. The count is the platform's own record of running
// turns (ai_turns), taken with the record under a lock per host, so web processes share one
// budget.

/** A turn counts this long past its own bound: one whose end was never recorded (its web
 * process died) stops counting then. */
const GRACE_S = 60;
/** What a refused turn is told to wait before it tries again. */
const RETRY_AFTER_S = 5;

interface Host {
  /** The Swarm node's id; null: the single engine host. */
  node: string | null;
  cpus: number;
}

/** The host of the instance's gateway and its CPUs; undefined when no worker has read them. */
async function hostOf(sql: TransactionSql, instanceId: string): Promise<Host | undefined> {
  const deployment = runtimeDeployment();
  const [node] = await sql<{ node: string; cpus: number }[]>`
    select n.node_id as node, n.nano_cpus / 1e9 as cpus
    from runtime_nodes n, jsonb_array_elements(n.instances) i
    where n.deployment = ${deployment} and i->>'instanceId' = ${instanceId}
    limit 1`;
  if (node) return { node: node.node, cpus: Number(node.cpus) };
  const [engine] = await sql<{ cpus: number | null }[]>`
    select cpus from runtime_engines where deployment = ${deployment}`;
  return engine?.cpus ? { node: null, cpus: engine.cpus } : undefined;
}

/** A turn of `ai_turns t` running now: recorded, not ended, within its bound and the grace. */
function liveTurn(sql: Sql | TransactionSql, boundMs: number) {
  const seconds = Math.ceil(boundMs / 1000) + GRACE_S;
  return sql`t.ended_at is null and t.started_at > now() - make_interval(secs => ${seconds})`;
}

/** The chat turns running now on the instance (a busy gateway is not a hung one). */
export async function turnsRunningOn(instanceId: string, boundMs: number): Promise<number> {
  const sql = db();
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from ai_turns t
    where ${liveTurn(sql, boundMs)} and t.instance_id = ${instanceId}`;
  return row?.n ?? 0;
}

/**
 * Turns running now on `host`, and of them the instance's own (recorded and not ended, within
 * their bound).
 */
async function inFlight(
  sql: TransactionSql,
  host: Host,
  instanceId: string,
  boundMs: number,
): Promise<{ host: number; instance: number }> {
  const live = liveTurn(sql, boundMs);
  const onHost = host.node
    ? sql`and t.instance_id in (
          select i->>'instanceId' from runtime_nodes n, jsonb_array_elements(n.instances) i
          where n.deployment = ${runtimeDeployment()} and n.node_id = ${host.node})`
    : sql``;
  const [row] = await sql<{ host: number; instance: number }[]>`
    select count(*)::int as host,
      (count(*) filter (where t.instance_id = ${instanceId}))::int as instance
    from ai_turns t where ${live} ${onHost}`;
  return { host: row?.host ?? 0, instance: row?.instance ?? 0 };
}

const refused = (message: string) =>
  new DomainError(
    503,
    `${message}; nothing was sent to the agent. Try again in a few seconds`,
    { retryAfterSeconds: RETRY_AFTER_S },
    { "Retry-After": String(RETRY_AFTER_S) },
  );

/**
 * The admission of a turn on `instanceId`'s host: refused (503) when its budget is spent.
 * `boundMs`: how long a turn may run (its reply's bound).
 */
export function hostTurnBudget(instanceId: string, boundMs: number): TurnAdmission {
  return async (sql) => {
    const perCpu = env().AGENT_TURNS_PER_CPU;
    if (perCpu <= 0) return;
    const host = await hostOf(sql, instanceId);
    if (!host) return; // not read yet: no budget rather than a guess
    await sql`select pg_advisory_xact_lock(hashtext(${`turn-budget:${runtimeDeployment()}:${host.node ?? "host"}`}))`;
    const budget = Math.max(1, Math.floor(perCpu * host.cpus));
    // One tenant never holds the whole host: at most half its budget per agent instance.
    const share = Math.max(1, Math.floor(budget / 2));
    const running = await inFlight(sql, host, instanceId, boundMs);
    if (running.instance >= share) {
      const turns = `${share} chat turn${share === 1 ? "" : "s"}`;
      throw refused(`This agent already runs ${turns} at once, its share of its host`);
    }
    if (running.host >= budget) {
      throw refused(`The agent's host is at its limit of ${budget} chat turns at once`);
    }
  };
}
