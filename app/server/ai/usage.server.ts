import { db } from "../platform/db.server.ts";

// What a user's AI usage looks like over the last days: tokens and cost per UTC day and model,
// for the usage page (its chart) and billing's get-usage action.

export interface DailyUsage {
  day: string;
  model: string;
  calls: number;
  promptTokens: number;
  completionTokens: number;
  costMicroUsd: number;
}

export async function dailyUsage(userId: string, days = 30): Promise<DailyUsage[]> {
  const rows = await db()<
    {
      day: string;
      model: string;
      calls: number;
      prompt_tokens: number;
      completion_tokens: number;
      cost: number;
    }[]
  >`select to_char((created_at at time zone 'utc')::date, 'YYYY-MM-DD') as day, model,
      count(*)::int as calls,
      sum(prompt_tokens)::bigint as prompt_tokens,
      sum(completion_tokens)::bigint as completion_tokens,
      sum(cost_micro_usd)::bigint as cost
    from ai_usage
    where user_id = ${userId}
      and created_at >= (now() at time zone 'utc')::date - ${days - 1}::int
    group by 1, 2 order by 1, 2`;
  return rows.map((r) => ({
    day: r.day,
    model: r.model,
    calls: r.calls,
    promptTokens: r.prompt_tokens,
    completionTokens: r.completion_tokens,
    costMicroUsd: r.cost,
  }));
}

// The usage page: a period of whole UTC days, every day present, per-model series for the charts
// (the long tail folded into one "other" series) and exact per-model totals for the table.

/** The periods the usage page offers; anything else means the default. */
export const usagePeriods = [7, 30, 90] as const;
export type UsagePeriod = (typeof usagePeriods)[number];
export const defaultUsagePeriod: UsagePeriod = 30;

/** `?days=` → one of the offered periods (anything else, or nothing, → 30). */
export function usagePeriod(value: string | null | undefined): UsagePeriod {
  const n = Number(value);
  return (usagePeriods as readonly number[]).includes(n) ? (n as UsagePeriod) : defaultUsagePeriod;
}

/** The chart shows at most this many series: beyond it, the top ones and one "other". */
export const MAX_CHART_SERIES = 6;

export interface UsageTotals {
  calls: number;
  promptTokens: number;
  completionTokens: number;
  /** Integer micro-USD (1 credit = 1 USD = 1,000,000): sums stay exact. */
  costMicroUsd: number;
}

export interface ModelUsage extends UsageTotals {
  model: string;
}

export interface UsageSeries {
  /** A model id, or "(other)" for the folded tail. */
  key: string;
  label: string;
  /** The folded tail of smaller models. */
  other: boolean;
  /** The models in this series (one, or the tail's). */
  models: string[];
  /** One entry per day of `UsageReport.days`, same order. */
  daily: { tokens: number; costMicroUsd: number }[];
}

export interface UsageReport {
  period: number;
  /** Every UTC day of the period, oldest first, YYYY-MM-DD. */
  days: string[];
  /** Every model used in the period, biggest cost first (then tokens, then id). */
  models: ModelUsage[];
  total: UsageTotals;
  series: UsageSeries[];
  /** The biggest day, summed over models (the charts' scale). */
  maxDailyTokens: number;
  maxDailyCostMicroUsd: number;
}

const utcDay = (d: Date) => d.toISOString().slice(0, 10);

/** The `period` UTC days ending with `now`'s, oldest first. */
export function utcDays(period: number, now = new Date()): string[] {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  return Array.from({ length: period }, (_, i) =>
    utcDay(new Date(today - (period - 1 - i) * 86_400_000)),
  );
}

const zero = (): UsageTotals => ({
  calls: 0,
  promptTokens: 0,
  completionTokens: 0,
  costMicroUsd: 0,
});

function add(into: UsageTotals, row: UsageTotals) {
  into.calls += row.calls;
  into.promptTokens += row.promptTokens;
  into.completionTokens += row.completionTokens;
  into.costMicroUsd += row.costMicroUsd;
}

const byWeight = (a: ModelUsage, b: ModelUsage) =>
  b.costMicroUsd - a.costMicroUsd ||
  b.promptTokens + b.completionTokens - (a.promptTokens + a.completionTokens) ||
  (a.model < b.model ? -1 : a.model > b.model ? 1 : 0);

/** Shapes `dailyUsage` rows for the usage page (pure; `usageReport` reads them). */
export function shapeUsage(rows: DailyUsage[], period: number, now = new Date()): UsageReport {
  // The period's days by this process's clock, plus any day the database's clock put a row on
  // (the two can straddle midnight): no row is ever left out of the chart or the table.
  const days = [...new Set([...utcDays(period, now), ...rows.map((r) => r.day)])].sort();
  const dayIndex = new Map(days.map((d, i) => [d, i]));

  const perModel = new Map<string, ModelUsage>();
  const total = zero();
  for (const r of rows) {
    const m = perModel.get(r.model) ?? { model: r.model, ...zero() };
    add(m, r);
    perModel.set(r.model, m);
    add(total, r);
  }
  const models = [...perModel.values()].sort(byWeight);

  // Up to MAX_CHART_SERIES models get their own series; beyond, the top MAX_CHART_SERIES - 1 do
  // and the rest share "other".
  const own = models.length > MAX_CHART_SERIES ? models.slice(0, MAX_CHART_SERIES - 1) : models;
  const tail = models.slice(own.length).map((m) => m.model);
  const emptyDaily = () => days.map(() => ({ tokens: 0, costMicroUsd: 0 }));
  const series: UsageSeries[] = own.map((m) => ({
    key: m.model,
    label: m.model,
    other: false,
    models: [m.model],
    daily: emptyDaily(),
  }));
  if (tail.length) {
    series.push({
      key: "(other)",
      label: `Other (${tail.length} models)`,
      other: true,
      models: tail,
      daily: emptyDaily(),
    });
  }
  const seriesOf = new Map<string, UsageSeries>();
  for (const s of series) for (const model of s.models) seriesOf.set(model, s);
  for (const r of rows) {
    const point = seriesOf.get(r.model)!.daily[dayIndex.get(r.day)!]!;
    point.tokens += r.promptTokens + r.completionTokens;
    point.costMicroUsd += r.costMicroUsd;
  }

  let maxDailyTokens = 0;
  let maxDailyCostMicroUsd = 0;
  days.forEach((_, i) => {
    let tokens = 0;
    let cost = 0;
    for (const s of series) {
      tokens += s.daily[i]!.tokens;
      cost += s.daily[i]!.costMicroUsd;
    }
    maxDailyTokens = Math.max(maxDailyTokens, tokens);
    maxDailyCostMicroUsd = Math.max(maxDailyCostMicroUsd, cost);
  });

  return { period, days, models, total, series, maxDailyTokens, maxDailyCostMicroUsd };
}

/** A user's AI usage over the last `period` UTC days (today included), for the usage page. */
export async function usageReport(userId: string, period: number): Promise<UsageReport> {
  return shapeUsage(await dailyUsage(userId, period), period);
}

// --- figures for the metrics endpoints --------------------------------------------------------
// Aggregate columns over ai_usage rows; callers add the scope (user, period) and the grouping.

/** The aggregate columns over ai_usage rows (read them with `usageFiguresOf`). */
export function usageFigureColumns() {
  return db()`count(*)::int as calls,
    count(*) filter (where status <> 'ok')::int as failed,
    count(*) filter (where created_at > now() - interval '1 hour')::int as last_hour,
    coalesce(sum(prompt_tokens), 0)::bigint as prompt_tokens,
    coalesce(sum(completion_tokens), 0)::bigint as completion_tokens,
    coalesce(sum(cost_micro_usd), 0)::bigint as cost,
    percentile_cont(0.5) within group (order by latency_ms) filter (where status = 'ok') as p50,
    percentile_cont(0.95) within group (order by latency_ms) filter (where status = 'ok') as p95`;
}

export interface UsageFigureRow {
  calls: number;
  failed: number;
  last_hour: number;
  prompt_tokens: number;
  completion_tokens: number;
  cost: number;
  p50: number | null;
  p95: number | null;
}

export interface UsageFigures {
  calls: number;
  /** Calls that did not succeed (provider or platform errors and rejected requests). */
  failed: number;
  /** Calls in the last hour (of those in scope). */
  lastHour: number;
  /** percent of calls that failed, or null without calls. */
  errorRate: number | null;
  promptTokens: number;
  completionTokens: number;
  costMicroUsd: number;
  /** Latency of the successful calls (ms, interpolated percentiles), null without any. */
  latencyMs: { p50: number | null; p95: number | null };
}

const roundOrNull = (n: number | null | undefined) => (n == null ? null : Math.round(n));

export function usageFiguresOf(row: UsageFigureRow | undefined): UsageFigures {
  const calls = row?.calls ?? 0;
  const failed = row?.failed ?? 0;
  return {
    calls,
    failed,
    lastHour: row?.last_hour ?? 0,
    errorRate: calls > 0 ? (100 * failed) / calls : null,
    promptTokens: row?.prompt_tokens ?? 0,
    completionTokens: row?.completion_tokens ?? 0,
    costMicroUsd: row?.cost ?? 0,
    latencyMs: { p50: roundOrNull(row?.p50), p95: roundOrNull(row?.p95) },
  };
}

/** What each provider's calls cost today (UTC), in micro-USD, platform-wide (operators). */
export async function providerSpendToday(): Promise<
  Array<{ provider: string; calls: number; costMicroUsd: number }>
> {
  const rows = await db()<{ provider: string | null; calls: number; cost: number }[]>`
    select provider, count(*)::int as calls, coalesce(sum(cost_micro_usd), 0)::bigint as cost
    from ai_usage where created_at >= date_trunc('day', now() at time zone 'utc') at time zone 'utc'
    group by provider order by provider`;
  return rows.map((r) => ({
    provider: r.provider ?? "none",
    calls: r.calls,
    costMicroUsd: Number(r.cost),
  }));
}
