import { z } from "zod";
import { messageFigures, turnFigureColumns, turnsQuery } from "../agents/message-figures.server.ts";
import { microToUsd } from "../ai/money.server.ts";
import { type UsageFigureRow, usageFigureColumns, usageFiguresOf } from "../ai/usage.server.ts";
import { db } from "../platform/db.server.ts";
import { MIN_POPULATION, percent } from "./shared.server.ts";

// GET /api/metrics/:userId/summary: the user's usage over a period next to the platform's
// ("industry") medians. The population is every user active in the period (a recorded turn or
// an AI call); each median is over the users that have the figure (rates and latencies need
// calls). Only medians leave the database — never another user's figures — and none below
// MIN_POPULATION users. The medians are computed at most once per POPULATION_CACHE_MS per
// period and process (they scan the whole period's activity); the user's own figures are fresh.

const DAY_MS = 86_400_000;
export const SUMMARY_PERIODS = { "7d": 7 * DAY_MS, "30d": 30 * DAY_MS, "90d": 90 * DAY_MS };
export type SummaryPeriod = keyof typeof SUMMARY_PERIODS;
const periodNames = Object.keys(SUMMARY_PERIODS) as [SummaryPeriod, ...SummaryPeriod[]];

export const POPULATION_CACHE_MS = 60_000;

export const summaryQuery = z.object({
  period: z.preprocess(
    (v) => (v === "" ? undefined : v),
    z
      .enum(periodNames, { error: `period must be one of ${periodNames.join(", ")}` })
      .default("30d"),
  ),
});

/** The compared figures, in answer order. Lower is better for the latency and error ones. */
const FIGURES = [
  "messages",
  "averageResponseMs",
  "successRate",
  "aiCalls",
  "aiTokens",
  "aiCostUsd",
  "aiErrorRate",
  "aiLatencyP50Ms",
] as const;
type Figure = (typeof FIGURES)[number];
type Figures = Record<Figure, number | null>;

interface Population {
  activeUsers: number;
  /** Per figure: its median and how many users have it. */
  medians: Record<Figure, { median: number | null; users: number }>;
}

async function computePopulation(since: Date): Promise<Population> {
  const sql = db();
  // Per user: the same figures as the user's own (messageFiguresOf / usageFiguresOf), in SQL.
  const per = FIGURES.map(
    (f) => sql`percentile_cont(0.5) within group (order by ${sql(f)}) as ${sql(`${f}_median`)},
      count(${sql(f)})::int as ${sql(`${f}_users`)}`,
  );
  const [row] = await sql<Record<string, number | null>[]>`
    with m as (
      select user_id, ${turnFigureColumns()} from (${turnsQuery({ since })}) turns
      group by user_id),
    a as (
      select user_id, ${usageFigureColumns()} from ai_usage
      where created_at >= ${since} and user_id is not null group by user_id),
    per_user as (
      select coalesce(m.processed, 0) as "messages",
        m.avg_ms as "averageResponseMs",
        case when m.judged > 0 then 100.0 * m.answered / m.judged end as "successRate",
        coalesce(a.calls, 0) as "aiCalls",
        coalesce(a.prompt_tokens + a.completion_tokens, 0) as "aiTokens",
        coalesce(a.cost, 0) as "aiCostUsd", -- micro-USD here, USD once read
        case when a.calls > 0 then 100.0 * a.failed / a.calls end as "aiErrorRate",
        a.p50 as "aiLatencyP50Ms"
      from m full join a on a.user_id = m.user_id)
    select count(*)::int as active_users,
      ${per.reduce((columns, column) => sql`${columns}, ${column}`)}
    from per_user`;
  const medians = Object.fromEntries(
    FIGURES.map((f) => {
      const median = row?.[`${f}_median`] ?? null;
      return [
        f,
        {
          median: f === "aiCostUsd" && median != null ? microToUsd(median) : median,
          users: row?.[`${f}_users`] ?? 0,
        },
      ];
    }),
  ) as Population["medians"];
  return { activeUsers: Number(row?.active_users ?? 0), medians };
}

const cache = new Map<SummaryPeriod, { at: number; value: Promise<Population> }>();

function population(period: SummaryPeriod, since: Date, now: number): Promise<Population> {
  const hit = cache.get(period);
  if (hit && now - hit.at < POPULATION_CACHE_MS) return hit.value;
  const value = computePopulation(since);
  const entry = { at: now, value };
  cache.set(period, entry);
  value.catch(() => {
    if (cache.get(period) === entry) cache.delete(period);
  });
  return value;
}

export function resetPopulationCache(): void {
  cache.clear();
}

async function ownFigures(userId: string, since: Date): Promise<Figures> {
  const [messages, [usageRow]] = await Promise.all([
    messageFigures({ userId, since }),
    db()<UsageFigureRow[]>`
      select ${usageFigureColumns()} from ai_usage
      where user_id = ${userId} and created_at >= ${since}`,
  ]);
  const usage = usageFiguresOf(usageRow);
  return {
    messages: messages.processed,
    averageResponseMs: messages.averageResponseMs,
    successRate: messages.successRate,
    aiCalls: usage.calls,
    aiTokens: usage.promptTokens + usage.completionTokens,
    aiCostUsd: microToUsd(usage.costMicroUsd),
    aiErrorRate: usage.errorRate,
    aiLatencyP50Ms: usage.latencyMs.p50,
  };
}

/** Milliseconds whole, money to the micro-dollar, the rest (rates, counts' medians) to 0.01. */
function rounded(figure: Figure, n: number | null): number | null {
  if (n == null) return null;
  if (figure === "averageResponseMs" || figure === "aiLatencyP50Ms") return Math.round(n);
  if (figure === "aiCostUsd") return Math.round(n * 1e6) / 1e6;
  return percent(n);
}

export async function userSummary(
  userId: string,
  query: { period: SummaryPeriod },
  now = Date.now(),
) {
  const since = new Date(now - SUMMARY_PERIODS[query.period]);
  const [own, pop] = await Promise.all([
    ownFigures(userId, since),
    population(query.period, since, now),
  ]);
  const comparable = pop.activeUsers >= MIN_POPULATION;
  const figures = Object.fromEntries(
    FIGURES.map((f) => {
      const value = rounded(f, own[f]);
      const { median: raw, users } = pop.medians[f];
      // Each median needs MIN_POPULATION users that have the figure, not just active ones.
      const median = comparable && users >= MIN_POPULATION ? rounded(f, raw) : null;
      const ratio =
        value != null && median != null && median !== 0
          ? Math.round((value / median) * 100) / 100
          : null;
      return [f, { value, median, ratio }];
    }),
  );
  return {
    summary: {
      userId,
      period: query.period,
      from: since.toISOString(),
      to: new Date(now).toISOString(),
      population: { activeUsers: pop.activeUsers, minimum: MIN_POPULATION },
      withheld: comparable
        ? null
        : `Fewer than ${MIN_POPULATION} active users in this period: platform medians are withheld`,
      figures,
    },
    status: "ok",
  };
}
