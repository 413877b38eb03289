import type { UsageReport, UsageSeries } from "../server/ai/usage.server.ts";
import { formatCount, formatMicroUsd } from "./money.ts";

// The AI usage page's body: period links, two stacked-bar charts drawn as SVG on the server (no
// chart library, no JavaScript needed), their legend and the per-model table. Plain anchors, so
// it renders outside a router too (the page test renders it to HTML).

/** Series colours in rank order (distinct in hue and lightness); the "other" series is grey. */
const palette = ["#4f46e5", "#0891b2", "#d97706", "#db2777", "#16a34a", "#7c3aed"];
const otherColour = "#94a3b8";

const colourOf = (series: UsageSeries[]) =>
  new Map(series.map((s, i) => [s.key, s.other ? otherColour : palette[i % palette.length]!]));

const tokens = (n: number) => `${formatCount(n)} token${n === 1 ? "" : "s"}`;

/** "2026-11-24" → "24 Nov" (fixed month names: server and browser agree). */
const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const shortDay = (day: string) =>
  `${Number(day.slice(8, 10))} ${months[Number(day.slice(5, 7)) - 1]}`;

const W = 720;
const H = 220;
const M = { top: 12, right: 8, bottom: 24, left: 88 };
const plotW = W - M.left - M.right;
const plotH = H - M.top - M.bottom;

function StackedBars({
  label,
  days,
  series,
  colours,
  value,
  max,
  format,
  testId,
}: {
  label: string;
  days: string[];
  series: UsageSeries[];
  colours: Map<string, string>;
  value: (point: { tokens: number; costMicroUsd: number }) => number;
  max: number;
  format: (n: number) => string;
  testId: string;
}) {
  const slot = plotW / Math.max(1, days.length);
  const barW = Math.max(1, slot * 0.75);
  const scale = max > 0 ? plotH / max : 0;
  return (
    <svg
      viewBox={`0 0 ${W} ${H}`}
      role="img"
      aria-label={`${label}, ${shortDay(days[0]!)} to ${shortDay(days.at(-1)!)} (UTC days); highest day ${format(max)}`}
      className="h-auto w-full"
      data-testid={testId}
    >
      {/* y axis: 0 and the biggest day */}
      <line x1={M.left} y1={M.top} x2={M.left} y2={M.top + plotH} stroke="#cbd5e1" />
      <line x1={M.left} y1={M.top + plotH} x2={W - M.right} y2={M.top + plotH} stroke="#cbd5e1" />
      <line
        x1={M.left}
        y1={M.top}
        x2={W - M.right}
        y2={M.top}
        stroke="#e2e8f0"
        strokeDasharray="4 4"
      />
      <text x={M.left - 6} y={M.top + 4} textAnchor="end" fontSize="11" fill="#475569">
        {format(max)}
      </text>
      <text x={M.left - 6} y={M.top + plotH} textAnchor="end" fontSize="11" fill="#475569">
        {format(0)}
      </text>
      {/* x axis: first and last day */}
      <text x={M.left} y={H - 6} fontSize="11" fill="#475569">
        {shortDay(days[0]!)}
      </text>
      <text x={W - M.right} y={H - 6} textAnchor="end" fontSize="11" fill="#475569">
        {shortDay(days.at(-1)!)}
      </text>
      {days.map((day, i) => {
        let y = M.top + plotH;
        const x = M.left + i * slot + (slot - barW) / 2;
        return (
          <g key={day}>
            {series.map((s) => {
              const v = value(s.daily[i]!);
              if (v <= 0) return null;
              const h = v * scale;
              y -= h;
              return (
                <rect key={s.key} x={x} y={y} width={barW} height={h} fill={colours.get(s.key)}>
                  <title>{`${day} · ${s.label}: ${format(v)}`}</title>
                </rect>
              );
            })}
          </g>
        );
      })}
    </svg>
  );
}

function Legend({ series, colours }: { series: UsageSeries[]; colours: Map<string, string> }) {
  return (
    <ul className="flex flex-wrap gap-x-4 gap-y-1 text-xs text-slate-600" aria-label="Legend">
      {series.map((s) => (
        <li key={s.key} className="flex items-center gap-1" title={s.models.join(", ")}>
          <svg width="10" height="10" aria-hidden="true">
            <rect width="10" height="10" fill={colours.get(s.key)} />
          </svg>
          {s.label}
        </li>
      ))}
    </ul>
  );
}

export function UsageView({
  report,
  periods,
}: {
  report: UsageReport;
  periods: readonly number[];
}) {
  const colours = colourOf(report.series);
  const seriesOfModel = new Map(
    report.series.flatMap((s) => s.models.map((m) => [m, s.key] as const)),
  );
  return (
    <div className="space-y-6">
      <header className="space-y-2">
        <h1 className="text-2xl font-semibold">AI usage</h1>
        <p className="text-sm text-slate-600">
          Tokens and cost of your model calls, per UTC day and model. Costs are in USD at the
          catalog's prices (1 credit = 1 USD); calls on your own provider key (BYOK) are shown at
          those prices too, though your provider bills them, not your credits.
        </p>
        <nav aria-label="Period" className="flex gap-2 text-sm">
          {periods.map((p) => (
            <a
              key={p}
              href={`/usage?days=${p}`}
              aria-current={p === report.period ? "page" : undefined}
              className={
                p === report.period
                  ? "rounded-md bg-indigo-600 px-3 py-1 font-medium text-white"
                  : "rounded-md border border-slate-300 bg-white px-3 py-1 text-slate-700 hover:bg-slate-100"
              }
            >
              {`Last ${p} days`}
            </a>
          ))}
        </nav>
      </header>

      {report.models.length === 0 ? (
        <p
          className="rounded-md border border-slate-200 bg-white p-6 text-slate-600"
          data-testid="usage-empty"
        >
          {`No AI usage in the last ${report.period} days.`} Calls your agents make to a model show
          up here, with their tokens and cost; see the{" "}
          <a href="/models" className="text-indigo-700 underline">
            models and their prices
          </a>
          .
        </p>
      ) : (
        <>
          <section className="space-y-2 rounded-lg border border-slate-200 bg-white p-4">
            <h2 className="font-medium">Tokens per day (prompt + completion)</h2>
            <StackedBars
              label="Daily tokens per model"
              days={report.days}
              series={report.series}
              colours={colours}
              value={(p) => p.tokens}
              max={report.maxDailyTokens}
              format={tokens}
              testId="tokens-chart"
            />
            <Legend series={report.series} colours={colours} />
          </section>

          <section className="space-y-2 rounded-lg border border-slate-200 bg-white p-4">
            <h2 className="font-medium">Cost per day (USD)</h2>
            <StackedBars
              label="Daily cost in USD per model"
              days={report.days}
              series={report.series}
              colours={colours}
              value={(p) => p.costMicroUsd}
              max={report.maxDailyCostMicroUsd}
              format={(n) => formatMicroUsd(n)}
              testId="cost-chart"
            />
            <Legend series={report.series} colours={colours} />
          </section>

          <section className="space-y-2 rounded-lg border border-slate-200 bg-white p-4">
            <h2 className="font-medium">{`Per model, last ${report.period} days`}</h2>
            <table className="w-full text-left text-sm" data-testid="usage-table">
              <thead className="text-slate-500">
                <tr>
                  <th scope="col" className="py-1">
                    Model
                  </th>
                  <th scope="col" className="text-right">
                    Calls
                  </th>
                  <th scope="col" className="text-right">
                    Prompt tokens
                  </th>
                  <th scope="col" className="text-right">
                    Completion tokens
                  </th>
                  <th scope="col" className="text-right">
                    Cost (USD)
                  </th>
                </tr>
              </thead>
              <tbody className="divide-y divide-slate-100">
                {report.models.map((m) => (
                  <tr key={m.model}>
                    <th scope="row" className="py-1 font-normal">
                      <span className="flex items-center gap-2">
                        <svg width="10" height="10" aria-hidden="true">
                          <rect
                            width="10"
                            height="10"
                            fill={colours.get(seriesOfModel.get(m.model) ?? "")}
                          />
                        </svg>
                        <code>{m.model}</code>
                      </span>
                    </th>
                    <td className="text-right tabular-nums">{formatCount(m.calls)}</td>
                    <td className="text-right tabular-nums">{formatCount(m.promptTokens)}</td>
                    <td className="text-right tabular-nums">{formatCount(m.completionTokens)}</td>
                    <td className="text-right tabular-nums">{formatMicroUsd(m.costMicroUsd)}</td>
                  </tr>
                ))}
              </tbody>
              <tfoot className="border-t border-slate-300 font-medium">
                <tr data-testid="usage-total">
                  <th scope="row" className="py-1 text-left">
                    Total
                  </th>
                  <td className="text-right tabular-nums">{formatCount(report.total.calls)}</td>
                  <td className="text-right tabular-nums">
                    {formatCount(report.total.promptTokens)}
                  </td>
                  <td className="text-right tabular-nums">
                    {formatCount(report.total.completionTokens)}
                  </td>
                  <td className="text-right tabular-nums">
                    {formatMicroUsd(report.total.costMicroUsd)}
                  </td>
                </tr>
              </tfoot>
            </table>
            <p className="text-xs text-slate-500">
              Calls include failed ones; a cost is rounded to 4 decimals here, the exact figure is
              kept in micro-USD. See also{" "}
              <a href="/billing" className="text-indigo-700 underline">
                billing
              </a>{" "}
              for your credit balance.
            </p>
          </section>
        </>
      )}
    </div>
  );
}
