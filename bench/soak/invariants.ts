import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { costMicroUsd } from "../../app/server/ai/money.server.ts";
import { explain } from "./diagnose.ts";
import type { Platform } from "./platform.ts";
import type { Sample } from "./record.ts";
import type { Turn } from "./turns.ts";
import type { SoakUser } from "./users.ts";

// The invariants the soak checks once its traffic and chaos are over, each printed as one line
// with its figure. The database is read directly (the soak runs it); Docker through its CLI.

const run = promisify(execFile);
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const DEPLOYMENT_LABEL = "agent-platform.deployment"; // worker/instances/engine.ts
const INSTANCE_LABEL = "agent-platform.instance-id"; // worker/runtime/types.ts

export interface Check {
  name: string;
  pass: boolean;
  figure: string;
}

async function dockerLabels(kind: "ps" | "volume" | "network", deployment: string) {
  const args =
    kind === "ps"
      ? ["ps", "-a", "--filter", `label=${DEPLOYMENT_LABEL}=${deployment}`, "--format", "{{.ID}}"]
      : [
          kind,
          "ls",
          "--filter",
          `label=${DEPLOYMENT_LABEL}=${deployment}`,
          "--format",
          "{{.Name}}",
        ];
  const { stdout } = await run("docker", args);
  const names = stdout.split("\n").filter(Boolean);
  const out: Array<{ name: string; instance: string | undefined }> = [];
  for (const name of names) {
    const inspect = kind === "ps" ? ["inspect"] : [kind, "inspect"];
    const format = kind === "ps" ? "{{json .Config.Labels}}" : "{{json .Labels}}";
    const { stdout: labels } = await run("docker", [...inspect, "--format", format, name]).catch(
      () => ({ stdout: "" }),
    );
    const instance = new RegExp(`"${INSTANCE_LABEL}":"([^"]+)"`).exec(labels)?.[1];
    out.push({ name, instance });
  }
  return out;
}

/** Turns: accepted ones recorded exactly once, refused ones never (waits for the recorder). */
export async function checkTurns(p: Platform, all: Turn[], users: SoakUser[]): Promise<Check[]> {
  const restored = new Set(users.filter((u) => u.restored).map((u) => u.agentId));
  let lost: Turn[] = [];
  let dup: Turn[] = [];
  let refusedRecorded: Turn[] = [];
  let considered: Turn[] = [];
  // The recorder catches a turn up from the gateway's session once the gateway answers it; a
  // host still busy after the traffic (boots after the faults) answers late. Waited for while
  // the count of lost turns still falls, up to SOAK_RECORD_WAIT_SECONDS (default 300).
  const deadline = Date.now() + Number(process.env.SOAK_RECORD_WAIT_SECONDS ?? 300) * 1000;
  let progressAt = Date.now();
  let fewest = Number.POSITIVE_INFINITY;
  for (;;) {
    const agents = new Set((await p.sql<{ id: string }[]>`select id from agents`).map((r) => r.id));
    // A deleted agent's messages went with it.
    considered = all.filter((t) => t.agentId && agents.has(t.agentId));
    const tokens = considered.map((t) => t.token);
    const rows = await p.sql<{ token: string; n: number }[]>`
      select t.token, count(m.id)::int as n
      from unnest(${tokens}::text[]) as t(token)
      left join agent_messages m on m.sender = 'user' and position(t.token in m.content) > 0
      group by t.token`;
    const count = new Map(rows.map((r) => [r.token, r.n]));
    const n = (t: Turn) => count.get(t.token) ?? 0;
    lost = considered.filter(
      (t) => t.verdict === "accepted" && n(t) === 0 && !restored.has(t.agentId),
    );
    dup = considered.filter((t) => n(t) > 1);
    refusedRecorded = considered.filter((t) => t.verdict === "refused" && n(t) > 0);
    if (lost.length === 0 || Date.now() > deadline) break;
    if (lost.length < fewest) [fewest, progressAt] = [lost.length, Date.now()];
    if (Date.now() - progressAt > 60_000) break; // a minute without one more turn recorded
    await pause(5000);
  }
  const accepted = considered.filter((t) => t.verdict === "accepted").length;
  const refused = considered.filter((t) => t.verdict === "refused").length;
  const unknown = considered.filter((t) => t.verdict === "unknown").length;
  const delivered = considered.filter((t) => t.verdict === "delivered").length;
  const show = (ts: Turn[]) =>
    ts
      .slice(0, 5)
      .map(
        (t) =>
          `${t.kind}:${t.token}@${new Date(t.at).toISOString().slice(11, 19)}(${users.find((u) => u.id === t.userId)?.role ?? "?"})`,
      )
      .join(" ");
  return [
    {
      name: "accepted turns recorded exactly once",
      pass: lost.length === 0 && dup.length === 0,
      figure: `${accepted} accepted, ${lost.length} lost, ${dup.length} duplicated (${unknown} of unknown outcome and ${delivered} delivered without a reply, at most once) ${show([...lost, ...dup])}`,
    },
    {
      name: "refused turns never recorded",
      pass: refusedRecorded.length === 0,
      figure: `${refused} refused, ${refusedRecorded.length} recorded ${show(refusedRecorded)}`,
    },
  ];
}

/** The ledger against the stand-in's reported usage priced by the catalog. */
export async function checkMoney(p: Platform): Promise<Check[]> {
  const { reported } = (await (await fetch(`${p.provider.url}/__usage`)).json()) as {
    reported: Array<{ model: string; prompt: number; completion: number }>;
  };
  const prices = new Map(
    (
      await p.sql<{ model_id: string; prompt: string; completion: string }[]>`
        select model_id, prompt_price::text as prompt, completion_price::text as completion
        from ai_models where provider = 'openai'`
    ).map((r) => [r.model_id, { prompt: BigInt(r.prompt), completion: BigInt(r.completion) }]),
  );
  let priced = 0;
  for (const u of reported) {
    const price = prices.get(u.model);
    if (price) priced += costMicroUsd(price, u.prompt, u.completion);
  }
  // The metering buffer is flushed every few seconds: read until two reads agree.
  let last = "";
  let row = { debits: 0, uncollected: 0, cost: 0, calls: 0 };
  for (let i = 0; i < 10; i++) {
    const [r] = await p.sql<(typeof row)[]>`select
      (select coalesce(-sum(amount_micro_usd), 0) from credit_ledger
        where reason like 'ai-usage:%')::float8 as debits,
      (select coalesce(sum(uncollected_micro_usd), 0) from ai_usage
        where billing_mode = 'credits')::float8 as uncollected,
      (select coalesce(sum(cost_micro_usd), 0) from ai_usage)::float8 as cost,
      (select count(*) from ai_usage where status = 'ok')::float8 as calls`;
    if (r) row = r;
    const key = JSON.stringify(row);
    if (key === last) break;
    last = key;
    await pause(3000);
  }
  const drift = priced - (row.debits + row.uncollected);
  const [neg] = await p.sql<{ n: number; min: number }[]>`
    select count(*) filter (where balance_micro_usd < 0)::int as n,
      coalesce(min(balance_micro_usd), 0)::float8 as min from ai_accounts`;
  // Credit leases are returned within their idle time; a killed web's leases expire.
  let holds = { n: 0, held: 0 };
  const started = Date.now();
  for (;;) {
    const [h] = await p.sql<(typeof holds)[]>`select
      (select count(*) from ai_reservations where amount_micro_usd > 0)::int as n,
      (select coalesce(sum(held_micro_usd), 0) from ai_accounts)::float8 as held`;
    if (h) holds = h;
    if ((holds.n === 0 && holds.held === 0) || Date.now() - started > 120_000) break;
    await pause(3000);
  }
  return [
    {
      name: "ledger equals the stand-in's usage priced by the catalog",
      pass: drift === 0,
      figure: `drift ${drift} micro-USD (${reported.length} provider calls priced ${priced}; debited ${row.debits} + uncollected ${row.uncollected}; usage rows cost ${row.cost})`,
    },
    {
      name: "no balance below zero",
      pass: (neg?.n ?? 0) === 0,
      figure: `${neg?.n ?? 0} below zero (lowest ${neg?.min ?? 0} micro-USD)`,
    },
    {
      name: "no hold left open",
      pass: holds.n === 0 && holds.held === 0,
      figure: `${holds.n} reservations, ${holds.held} micro-USD held, after ${Math.round((Date.now() - started) / 1000)} s`,
    },
  ];
}

const matches = (
  want: SoakUser["expected"]["state"],
  row: { observed_state: string } | undefined,
) =>
  want === "deleted"
    ? !row
    : want === "stopped"
      ? row?.observed_state === "stopped"
      : row?.observed_state === "running" || row?.observed_state === "sleeping";

/** Every agent in its last asked state, polled until `deadline`; then one container/volume each. */
/** The agents not in their asked state now (a request of unknown outcome allows either). */
async function notConverged(p: Platform, users: SoakUser[]) {
  const rows = await p.sql<{ user_id: string; observed_state: string }[]>`
    select user_id, observed_state from instances`;
  return users
    .map((u) => ({ u, row: rows.find((r) => r.user_id === u.id) }))
    .filter(
      ({ u, row }) =>
        !(
          matches(u.expected.state, row) ||
          (u.expected.unsure !== undefined && matches(u.expected.unsure, row))
        ),
    )
    .map(({ u, row }) => ({
      user: u,
      line: `${u.id} wants ${u.expected.state} is ${row?.observed_state ?? "gone"}`,
    }));
}

/**
 * Polls from the last fault while the traffic goes on (its requests can outlast the run by
 * minutes on a starved machine, so a poll that only began after them measured the traffic, not
 * the platform): when every agent was first in its asked state at once.
 */
export function watchConvergence(p: Platform, users: SoakUser[], lastChaos: number) {
  let stopped = false;
  let at: number | undefined;
  // Who was still off at the goal (60 s after the last fault), and why: a late convergence is
  // told apart (a platform fault, or a gateway still booting on a starved machine).
  let late: string[] = [];
  const done = (async () => {
    while (!stopped && at === undefined) {
      const off = await notConverged(p, users).catch(() => undefined);
      if (off?.length === 0) at = Date.now();
      else {
        if (off && late.length === 0 && Date.now() - lastChaos >= 60_000) {
          late = await Promise.all(off.map((o) => explain(p, o.user).catch(() => o.line)));
        }
        await pause(2000);
      }
    }
  })();
  return {
    async stop(): Promise<{ at: number | undefined; late: string[] }> {
      stopped = true;
      await done;
      return { at, late };
    },
  };
}

/**
 * Every agent in its last asked state, polled until `deadline`; then one container/volume each.
 * `firstConverged`: when the watcher from the last fault first saw them all converged.
 */
export async function checkConvergence(
  p: Platform,
  users: SoakUser[],
  lastChaos: number,
  deadline: number,
  watched: { at: number | undefined; late: string[] } = { at: undefined, late: [] },
): Promise<Check[]> {
  let offUsers: SoakUser[] = [];
  let off: string[] = [];
  let convergedAt = Date.now();
  for (;;) {
    const now = await notConverged(p, users);
    offUsers = now.map((o) => o.user);
    off = now.map((o) => o.line);
    convergedAt = Date.now();
    if (off.length === 0 || Date.now() > deadline) break;
    await pause(2000);
  }
  // Converged at the end, and first converged when the watcher saw it (if it did).
  if (off.length === 0 && watched.at !== undefined) convergedAt = watched.at;
  const after = Math.max(0, Math.round((convergedAt - lastChaos) / 1000));
  // Each agent not converged says why: observed vs desired, last error, its last jobs.
  // Those converged late: why they were still off at the 60 s goal.
  const why = off.length
    ? await Promise.all(offUsers.map((u) => explain(p, u)))
    : convergedAt - lastChaos > 60_000
      ? watched.late.map((w) => `(at 60 s) ${w}`)
      : [];
  const instances = await p.sql<{ id: string; user_id: string; observed_state: string }[]>`
    select id, user_id, observed_state from instances`;
  const pool = await p.sql<{ container_id: string | null }[]>`
    select container_id from gateway_pool`.catch(() => []);
  const ids = new Set(instances.map((i) => i.id));
  const containers = await dockerLabels("ps", p.deployment);
  const labelled = await dockerLabels("volume", p.deployment);
  // A limited state volume comes with its gateway's /tmp (`<volume>-tmp`, decision 0224): one
  // agent's storage, counted once; a `-tmp` without its volume is still an orphan.
  const names = new Set(labelled.map((v) => v.name));
  // A volume whose removal the engine could not do for now (decision 0248) is the platform's to
  // remove later (reconcile retries it): listed apart, not an orphan.
  const deferred = new Set(
    (await p.sql<{ volume: string }[]>`select volume from volume_removals`.catch(() => [])).flatMap(
      (r) => [r.volume, `${r.volume}-tmp`],
    ),
  );
  const volumes = labelled.filter(
    (v) =>
      !deferred.has(v.name) &&
      !(v.name.endsWith("-tmp") && names.has(v.name.slice(0, -"-tmp".length))),
  );
  const deferredHere = labelled.filter((v) => deferred.has(v.name) && !v.name.endsWith("-tmp"));
  const networks = await dockerLabels("network", p.deployment);
  const poolIds = new Set(pool.map((r) => r.container_id?.slice(0, 12)));
  const wrongCounts = instances
    .map((i) => ({
      i,
      c: containers.filter((c) => c.instance === i.id).length,
      v: volumes.filter((v) => v.instance === i.id).length,
    }))
    .filter(({ i, c, v }) => v !== 1 || c > 1 || (i.observed_state === "running" && c !== 1))
    .map(({ i, c, v }) => `${i.id}: ${c} containers ${v} volumes`);
  const orphan = [
    ...containers
      .filter((c) => !(c.instance && ids.has(c.instance)) && !poolIds.has(c.name.slice(0, 12)))
      .map((c) => `container ${c.name}`),
    ...volumes.filter((v) => !(v.instance && ids.has(v.instance))).map((v) => `volume ${v.name}`),
    ...networks
      .filter((n) => n.instance !== undefined && !ids.has(n.instance))
      .map((n) => `network ${n.name}`),
  ];
  const jobs = await p.sql<{ name: string; state: string }[]>`
    select name, state from pgboss.job
    where state in ('created', 'retry', 'active')
      and data ? 'instanceId' and not (data->>'instanceId' = any(${[...ids]}::text[]))`;
  const holdsOfNobody = await p.sql<{ n: number }[]>`
    select count(*)::int as n from ai_reservations r
    where not exists (select 1 from users u where u.id = r.user_id)`;
  orphan.push(...jobs.map((j) => `job ${j.name} ${j.state}`));
  if ((holdsOfNobody[0]?.n ?? 0) > 0) orphan.push(`${holdsOfNobody[0]?.n} holds of no user`);
  return [
    {
      name: "every agent in its last asked state within 60 s of the last fault",
      pass: off.length === 0 && convergedAt - lastChaos <= 60_000,
      figure: `${users.length - off.length}/${users.length} converged, ${after} s after the last fault${off.length ? `: ${off.join("; ")}` : ""}${why.map((w) => `\n      why: ${w}`).join("")}`,
    },
    {
      name: "one container and one volume per agent",
      pass: wrongCounts.length === 0,
      figure: `${instances.length} instances, ${containers.length} containers, ${volumes.length} volumes${wrongCounts.length ? `: ${wrongCounts.join("; ")}` : ""}`,
    },
    {
      name: "no orphan container, volume, network, job or hold",
      pass: orphan.length === 0,
      figure: `${orphan.length} orphans${orphan.length ? `: ${orphan.slice(0, 8).join("; ")}` : ""}; ${deferredHere.length} volume removals deferred (reconcile retries them)${deferredHere.length ? `: ${deferredHere.map((v) => v.name).join(", ")}` : ""}`,
    },
  ];
}

export function checkAnswers(samples: Sample[]): Check[] {
  const fivehundreds = samples.filter((s) => s.outcome === 500);
  const hanging = samples.filter((s) => s.outcome === "timeout");
  const other5xx = samples.filter((s) => typeof s.outcome === "number" && s.outcome > 500);
  const by = (ss: Sample[]) =>
    [...new Set(ss.map((s) => s.kind))]
      .map((k) => `${k}×${ss.filter((s) => s.kind === k).length}`)
      .join(" ");
  return [
    {
      name: "no 500 answered",
      pass: fivehundreds.length === 0,
      figure: `${fivehundreds.length} of ${samples.length} requests ${by(fivehundreds)} (other 5xx: ${other5xx.length} ${by(other5xx)}; network errors: ${samples.filter((s) => s.outcome === "network").length})`,
    },
    {
      name: "no request hanging past its timeout",
      pass: hanging.length === 0,
      figure: `${hanging.length} timed out ${by(hanging)}`,
    },
  ];
}
