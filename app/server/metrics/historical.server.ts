import { z } from "zod";
import {
  messageFiguresOf,
  type TurnFigureRow,
  turnFigureColumns,
  turnsQuery,
} from "../agents/message-figures.server.ts";
import { type UsageFigureRow, usageFigureColumns, usageFiguresOf } from "../ai/usage.server.ts";
import { db } from "../platform/db.server.ts";
import { aiView, messagesView } from "./shared.server.ts";

// GET /api/metrics/:userId/historical: the user's own time series, one point per UTC hour or
// day (every bucket present, empty ones zero), of their agents' turns and their AI calls, with
// totals over the whole period. The period is whole buckets ending with the current one.

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

export const HISTORY_PERIODS = {
  "24h": DAY_MS,
  "7d": 7 * DAY_MS,
  "30d": 30 * DAY_MS,
  "90d": 90 * DAY_MS,
};
export type HistoryPeriod = keyof typeof HISTORY_PERIODS;
const periodNames = Object.keys(HISTORY_PERIODS) as [HistoryPeriod, ...HistoryPeriod[]];
export const HISTORY_INTERVALS = { hour: HOUR_MS, day: DAY_MS };
export type HistoryInterval = keyof typeof HISTORY_INTERVALS;

/** Hourly points for at most this long (7 days: 168 points); days up to the longest period. */
const MAX_HOURLY_MS = 7 * DAY_MS;

const blankToUndefined = (v: unknown) => (v === "" ? undefined : v);

export const historicalQuery = z
  .object({
    period: z.preprocess(
      blankToUndefined,
      z
        .enum(periodNames, { error: `period must be one of ${periodNames.join(", ")}` })
        .default("7d"),
    ),
    interval: z.preprocess(
      blankToUndefined,
      z.enum(["hour", "day"], { error: "interval must be hour or day" }).optional(),
    ),
  })
  .transform(({ period, interval }) => ({
    period,
    // Default: hours for a day, days beyond.
    interval: interval ?? (period === "24h" ? "hour" : "day"),
  }))
  .refine((q) => q.interval !== "hour" || HISTORY_PERIODS[q.period] <= MAX_HOURLY_MS, {
    message: "hour is allowed for periods up to 7d",
    path: ["interval"],
  });

/** The bucket starts, oldest first: `period` worth of whole UTC buckets ending with now's. */
export function bucketStarts(period: HistoryPeriod, interval: HistoryInterval, now = Date.now()) {
  const step = HISTORY_INTERVALS[interval];
  const current = Math.floor(now / step) * step;
  const count = Math.max(1, Math.round(HISTORY_PERIODS[period] / step));
  return Array.from({ length: count }, (_, i) => new Date(current - (count - 1 - i) * step));
}

type Bucketed<R> = R & { bucket: Date | null };

export async function userHistory(
  userId: string,
  query: { period: HistoryPeriod; interval: HistoryInterval },
  now = Date.now(),
) {
  const starts = bucketStarts(query.period, query.interval, now);
  const from = starts[0]!;
  const step = query.interval === "hour" ? "1 hour" : "1 day";
  const sql = db();
  // One row per non-empty bucket, plus the period's total (the empty grouping set: bucket null).
  const bucket = sql`date_bin(${step}::interval, created_at, ${from}::timestamptz) as bucket`;
  const [messageRows, usageRows] = await Promise.all([
    sql<Bucketed<TurnFigureRow>[]>`
      select bucket, ${turnFigureColumns()}
      from (select *, ${bucket} from (${turnsQuery({ userId, since: from })}) turns) t
      group by grouping sets ((bucket), ())`,
    sql<Bucketed<UsageFigureRow>[]>`
      select bucket, ${usageFigureColumns()}
      from (select *, ${bucket} from ai_usage
        where user_id = ${userId} and created_at >= ${from}) t
      group by grouping sets ((bucket), ())`,
  ]);
  const byBucket = <R>(rows: Bucketed<R>[]) =>
    new Map(rows.map((r) => [r.bucket === null ? "total" : r.bucket.toISOString(), r]));
  const messages = byBucket(messageRows);
  const usage = byBucket(usageRows);
  return {
    historical: {
      userId,
      period: query.period,
      interval: query.interval,
      from: from.toISOString(),
      to: new Date(starts.at(-1)!.getTime() + HISTORY_INTERVALS[query.interval]).toISOString(),
      points: starts.map((start) => {
        const key = start.toISOString();
        return {
          start: key,
          messages: messagesView(messageFiguresOf(messages.get(key))),
          ai: aiView(usageFiguresOf(usage.get(key))),
        };
      }),
      totals: {
        messages: messagesView(messageFiguresOf(messages.get("total"))),
        ai: aiView(usageFiguresOf(usage.get("total"))),
      },
    },
    status: "ok",
  };
}
