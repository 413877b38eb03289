import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { requirePermission } from "./organisations.server.ts";

// An organisation's spend by member and by agent over a period (issue 48, decision 0215), from
// its metered calls (ai_usage, attributed by the platform's chat turns) and what each took from
// its credits (the ledger row `led_<usage id>` the metering wrote with it). billing.read.

/** The longest period one report covers (a year and a day: a leap year's whole year). */
export const MAX_SPEND_DAYS = 366;

export interface SpendPeriod {
  /** First UTC day counted, YYYY-MM-DD. */
  from: string;
  /** Last UTC day counted, YYYY-MM-DD (inclusive). */
  to: string;
}

export interface SpendFigures {
  calls: number;
  /** The calls' cost as metered, micro-USD (BYOK calls included). */
  costMicroUsd: number;
  /** What the calls took from the organisation's credits, micro-USD (1 credit = 1,000,000). */
  creditsMicroUsd: number;
}

export interface MemberSpend extends SpendFigures {
  /** null: calls no person is known for (older rows, channel messages, heartbeats). */
  userId: string | null;
  name: string | null;
  email: string | null;
  /** Still a member of the organisation. */
  member: boolean;
}

export interface AgentSpend extends SpendFigures {
  /** null: calls no agent is known for. */
  agentId: string | null;
  /** null when not attributed or the agent was deleted. */
  name: string | null;
}

export interface SpendReport {
  period: SpendPeriod;
  total: SpendFigures;
  members: MemberSpend[];
  agents: AgentSpend[];
}

const day = (d: Date) => d.toISOString().slice(0, 10);

/** This UTC month so far: the default period. */
export function currentMonth(now = new Date()): SpendPeriod {
  return { from: `${day(now).slice(0, 8)}01`, to: day(now) };
}

/** The period from optional `from`/`to` days; 400 when reversed or longer than a year. */
export function spendPeriod(from?: string, to?: string, now = new Date()): SpendPeriod {
  const month = currentMonth(now);
  const period = { from: from ?? month.from, to: to ?? (from ? day(now) : month.to) };
  const days = (Date.parse(period.to) - Date.parse(period.from)) / 86_400_000 + 1;
  if (days < 1) throw new DomainError(400, "from: must not be after to");
  if (days > MAX_SPEND_DAYS) {
    throw new DomainError(400, `to: a period covers at most ${MAX_SPEND_DAYS} days`);
  }
  return period;
}

interface Row {
  by_person: boolean;
  key: string | null;
  calls: number;
  cost: string;
  credits: string;
}

const figures = (r: Row): SpendFigures => ({
  calls: r.calls,
  costMicroUsd: Number(r.cost),
  creditsMicroUsd: Number(r.credits),
});

export async function organisationSpend(
  organisationId: string,
  personId: string,
  period: SpendPeriod,
): Promise<SpendReport> {
  await requirePermission(organisationId, personId, "billing.read", db());
  const since = new Date(`${period.from}T00:00:00Z`);
  const until = new Date(Date.parse(`${period.to}T00:00:00Z`) + 86_400_000);
  // One pass over the period's rows, grouped both ways; sums stay integers (bigint).
  const rows = await db()<Row[]>`
    select grouping(u.agent_id) = 1 as by_person,
      case when grouping(u.agent_id) = 1 then u.acting_user_id else u.agent_id end as key,
      count(*)::int as calls, coalesce(sum(u.cost_micro_usd), 0)::bigint as cost,
      coalesce(sum(-l.amount_micro_usd), 0)::bigint as credits
    from ai_usage u left join credit_ledger l on l.id = 'led_' || u.id
    where u.user_id = ${organisationId} and u.created_at >= ${since} and u.created_at < ${until}
    group by grouping sets ((u.acting_user_id), (u.agent_id))`;
  const personRows = rows.filter((r) => r.by_person);
  const agentRows = rows.filter((r) => !r.by_person);
  const personIds = personRows.flatMap((r) => (r.key ? [r.key] : []));
  const agentIds = agentRows.flatMap((r) => (r.key ? [r.key] : []));
  const [people, agents] = await Promise.all([
    personIds.length
      ? db()<{ id: string; name: string; email: string; member: boolean }[]>`
          select u.id, u.name, u.email, exists (
            select 1 from organisation_members m
            where m.organisation_id = ${organisationId} and m.user_id = u.id) as member
          from users u where u.id = any(${personIds})`
      : [],
    agentIds.length
      ? db()<{ id: string; name: string }[]>`
          select id, name from agents where id = any(${agentIds}) and user_id = ${organisationId}`
      : [],
  ]);
  const person = new Map(people.map((p) => [p.id, p]));
  const agent = new Map(agents.map((a) => [a.id, a]));
  const byCost = <T extends SpendFigures>(a: T, b: T) => b.costMicroUsd - a.costMicroUsd;
  const total = personRows.reduce<SpendFigures>(
    (sum, r) => ({
      calls: sum.calls + r.calls,
      costMicroUsd: sum.costMicroUsd + Number(r.cost),
      creditsMicroUsd: sum.creditsMicroUsd + Number(r.credits),
    }),
    { calls: 0, costMicroUsd: 0, creditsMicroUsd: 0 },
  );
  return {
    period,
    total,
    members: personRows
      .map((r) => {
        const p = r.key ? person.get(r.key) : undefined;
        return {
          userId: r.key,
          name: p?.name ?? null,
          email: p?.email ?? null,
          member: p?.member ?? false,
          ...figures(r),
        };
      })
      .sort(byCost),
    agents: agentRows
      .map((r) => ({
        agentId: r.key,
        name: (r.key && agent.get(r.key)?.name) || null,
        ...figures(r),
      }))
      .sort(byCost),
  };
}
