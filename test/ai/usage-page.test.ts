import { createElement } from "react";
import { renderToString } from "react-dom/server";
import { beforeAll, describe, expect, it } from "vitest";
import { formatCount, formatMicroUsd } from "../../app/components/money.ts";
import { UsageView } from "../../app/components/usage.tsx";
import { loader } from "../../app/routes/usage.tsx";
import {
  type DailyUsage,
  MAX_CHART_SERIES,
  shapeUsage,
  utcDays,
} from "../../app/server/ai/usage.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { sessionCookieFor } from "../helpers/users.ts";

// The usage page (/usage): the loader as a signed-in browser calls it, and the page rendered to
// HTML once. Rows go straight into ai_usage, on days relative to today (UTC).

const A = "usr_usage_a";
const B = "usr_usage_b";
const EMPTY = "usr_usage_empty";

const DAY = 86_400_000;
/** Noon UTC `k` days ago (k = 0: now, so the row is never in the future). */
const daysAgo = (k: number) => {
  if (k === 0) return new Date();
  const now = new Date();
  return new Date(
    Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) - k * DAY + DAY / 2,
  );
};
const dayOf = (k: number) => daysAgo(k).toISOString().slice(0, 10);

let seq = 0;
async function usage(
  userId: string,
  model: string,
  k: number,
  promptTokens: number,
  completionTokens: number,
  costMicroUsd: number,
) {
  await db()`insert into ai_usage (id, user_id, endpoint, provider, model, prompt_tokens,
      completion_tokens, cost_micro_usd, billing_mode, latency_ms, status, http_status, created_at)
    values (${`use_${++seq}`}, ${userId}, 'agents', 'openai', ${model}, ${promptTokens},
      ${completionTokens}, ${costMicroUsd}, 'credits', 3, 'ok', 200, ${daysAgo(k)})`;
}

async function load(userId: string | null, query = "") {
  const headers: Record<string, string> = {};
  if (userId) headers.cookie = await sessionCookieFor(userId);
  const request = new Request(`http://localhost/usage${query}`, { headers });
  return loader({ request, params: {}, context: {} });
}

beforeAll(async () => {
  // A: three models in the last 30 days, one row 40 days ago (90 only), one 100 days ago (never).
  await usage(A, "openai/gpt-4o", 0, 1000, 500, 300_000);
  await usage(A, "openai/gpt-4o", 2, 2000, 250, 200_000);
  await usage(A, "openai/gpt-4o", 10, 30, 20, 50);
  await usage(A, "anthropic/claude-sonnet-4", 2, 1234, 4321, 987_654);
  await usage(A, "local/llama-3.3", 0, 5000, 5000, 0);
  await usage(A, "openai/gpt-4o", 40, 7, 7, 7);
  await usage(A, "openai/gpt-4o", 100, 9, 9, 9);
  // B: the same model on the same days, and one of its own.
  await usage(B, "openai/gpt-4o", 0, 99_999, 99_999, 123_456_789);
  await usage(B, "mistral/mistral-large", 2, 1, 1, 1);
});

describe("the usage page", () => {
  it("signed out: redirected to sign in and back", async () => {
    const res = await load(null, "?days=7").catch((thrown: unknown) => thrown);
    expect(res).toBeInstanceOf(Response);
    expect((res as Response).status).toBe(302);
    expect((res as Response).headers.get("location")).toBe(
      `/signin?redirectTo=${encodeURIComponent("/usage?days=7")}`,
    );
  });

  it("exact per-model totals of the signed-in user only, biggest cost first", async () => {
    const { report, periods } = await load(A);
    expect(periods).toEqual([7, 30, 90]);
    expect(report.period).toBe(30);
    expect(report.models).toEqual([
      {
        model: "anthropic/claude-sonnet-4",
        calls: 1,
        promptTokens: 1234,
        completionTokens: 4321,
        costMicroUsd: 987_654,
      },
      {
        model: "openai/gpt-4o",
        calls: 3,
        promptTokens: 3030,
        completionTokens: 770,
        // 0.3 + 0.2 + 0.00005 USD: in floats 0.50005 → "0.5000"; in micro-USD exactly 500050.
        costMicroUsd: 500_050,
      },
      {
        model: "local/llama-3.3",
        calls: 1,
        promptTokens: 5000,
        completionTokens: 5000,
        costMicroUsd: 0,
      },
    ]);
    expect(report.total).toEqual({
      calls: 5,
      promptTokens: 9264,
      completionTokens: 10_091,
      costMicroUsd: 1_487_704,
    });
    // The float sum would drift (and round the wrong way); the page shows the exact figure.
    expect((0.3 + 0.2 + 0.00005).toFixed(4)).toBe("0.5000");

    const other = await load(B);
    expect(other.report.models.map((m) => [m.model, m.calls, m.costMicroUsd])).toEqual([
      ["openai/gpt-4o", 1, 123_456_789],
      ["mistral/mistral-large", 1, 1],
    ]);
  });

  it("every UTC day of the period is there, empty days as zeros", async () => {
    const { report } = await load(A);
    expect(report.days).toHaveLength(30);
    expect(report.days).toEqual(utcDays(30));
    expect(report.days.at(-1)).toBe(dayOf(0));
    expect(report.days[0]).toBe(dayOf(29));
    const series = Object.fromEntries(report.series.map((s) => [s.key, s.daily]));
    expect(Object.keys(series)).toEqual([
      "anthropic/claude-sonnet-4",
      "openai/gpt-4o",
      "local/llama-3.3",
    ]);
    const gpt = series["openai/gpt-4o"]!;
    expect(gpt[29]).toEqual({ tokens: 1500, costMicroUsd: 300_000 });
    expect(gpt[27]).toEqual({ tokens: 2250, costMicroUsd: 200_000 });
    expect(gpt[19]).toEqual({ tokens: 50, costMicroUsd: 50 });
    expect(gpt.filter((p) => p.tokens === 0 && p.costMicroUsd === 0)).toHaveLength(27);
    expect(series["anthropic/claude-sonnet-4"]![27]).toEqual({
      tokens: 5555,
      costMicroUsd: 987_654,
    });
    expect(series["local/llama-3.3"]![29]).toEqual({ tokens: 10_000, costMicroUsd: 0 });
    // The charts' scale: the biggest day summed over models.
    expect(report.maxDailyTokens).toBe(11_500);
    expect(report.maxDailyCostMicroUsd).toBe(1_187_654);
  });

  it("?days= is 7, 30 or 90; anything else is 30", async () => {
    const week = (await load(A, "?days=7")).report;
    expect(week.period).toBe(7);
    expect(week.days).toHaveLength(7);
    expect(week.models.find((m) => m.model === "openai/gpt-4o")).toMatchObject({
      calls: 2,
      costMicroUsd: 500_000,
    });

    const quarter = (await load(A, "?days=90")).report;
    expect(quarter.days).toHaveLength(90);
    expect(quarter.models.find((m) => m.model === "openai/gpt-4o")).toMatchObject({
      calls: 4,
      promptTokens: 3037,
      costMicroUsd: 500_057,
    });

    for (const days of ["", "31", "365", "0", "-7", "abc", "7days", "1e1"]) {
      const { report } = await load(A, `?days=${days}`);
      expect([days, report.period, report.days.length]).toEqual([days, 30, 30]);
    }
  });

  it("folds models beyond the sixth into one 'other' series (the table keeps them all)", () => {
    const now = new Date("2026-11-24T10:00:00Z");
    const rows: DailyUsage[] = Array.from({ length: 8 }, (_, i) => ({
      day: "2026-11-23",
      model: `vendor/m${i}`,
      calls: 1,
      promptTokens: 10 * (i + 1),
      completionTokens: 0,
      costMicroUsd: 100 * (i + 1),
    }));
    const report = shapeUsage(rows, 7, now);
    expect(report.days).toEqual(utcDays(7, now));
    expect(report.days).toEqual([
      "2026-11-18",
      "2026-11-19",
      "2026-11-20",
      "2026-11-21",
      "2026-11-22",
      "2026-11-23",
      "2026-11-24",
    ]);
    expect(report.models).toHaveLength(8);
    expect(report.series).toHaveLength(MAX_CHART_SERIES);
    expect(report.series.map((s) => s.label)).toEqual([
      "vendor/m7",
      "vendor/m6",
      "vendor/m5",
      "vendor/m4",
      "vendor/m3",
      "Other (3 models)",
    ]);
    const other = report.series.at(-1)!;
    expect(other.other).toBe(true);
    expect(other.models).toEqual(["vendor/m2", "vendor/m1", "vendor/m0"]);
    expect(other.daily[5]).toEqual({ tokens: 60, costMicroUsd: 600 });

    // Six models: each its own series.
    expect(shapeUsage(rows.slice(0, 6), 7, now).series.map((s) => s.other)).toEqual(
      Array(6).fill(false),
    );
  });

  it("formats integer micro-USD to 4 decimals, half up, without floats", () => {
    expect(formatMicroUsd(0)).toBe("$0.0000");
    expect(formatMicroUsd(49)).toBe("$0.0000");
    expect(formatMicroUsd(50)).toBe("$0.0001");
    expect(formatMicroUsd(500_050)).toBe("$0.5001");
    expect(formatMicroUsd(1_000_050)).toBe("$1.0001");
    expect(formatMicroUsd(1_234_567_890_123)).toBe("$1,234,567.8901");
    expect(formatMicroUsd(1_234_567, 6)).toBe("$1.234567");
    expect(formatMicroUsd(1_500_000, 0)).toBe("$2");
    expect(formatCount(0)).toBe("0");
    expect(formatCount(1_234_567)).toBe("1,234,567");
  });

  it("renders two labelled SVG charts, a legend and the per-model table", async () => {
    const data = await load(A);
    const html = renderToString(createElement(UsageView, data));
    const svgs = html.match(/<svg[^>]*role="img"[^>]*>/g) ?? [];
    expect(svgs).toHaveLength(2);
    expect(svgs[0]).toContain('aria-label="Daily tokens per model');
    expect(svgs[0]).toContain("highest day 11,500 tokens");
    expect(svgs[1]).toContain('aria-label="Daily cost in USD per model');
    expect(svgs[1]).toContain("highest day $1.1877");
    expect(html).toContain(`<title>${dayOf(2)} · anthropic/claude-sonnet-4: 5,555 tokens</title>`);
    expect(html).toContain(`<title>${dayOf(0)} · openai/gpt-4o: $0.3000</title>`);
    expect(html).toContain(`<title>${dayOf(10)} · openai/gpt-4o: $0.0001</title>`);
    // A free model has tokens but no cost segment.
    expect(html).toContain(`<title>${dayOf(0)} · local/llama-3.3: 10,000 tokens</title>`);
    expect(html).not.toContain("local/llama-3.3: $");
    expect(html).toContain('aria-current="page"');
    expect(html).toMatch(/<code>openai\/gpt-4o<\/code>.*?\$0\.5001<\/td>/s);
    const total = html.match(/<tr data-testid="usage-total">.*?<\/tr>/s)?.[0] ?? "";
    expect(total.replace(/<[^>]+>/g, "|").replace(/\|+/g, "|")).toBe(
      "|Total|5|9,264|10,091|$1.4877|",
    );
    expect(html).not.toContain("usage-empty");
  });

  it("says so when there is no usage", async () => {
    const data = await load(EMPTY);
    expect(data.report.models).toEqual([]);
    expect(data.report.days).toHaveLength(30);
    const html = renderToString(createElement(UsageView, data));
    expect(html).toContain("No AI usage in the last 30 days");
    expect(html).not.toContain("<table");
    expect(html).not.toContain('role="img"');
  });
});
