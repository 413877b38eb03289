// The density bench's arithmetic and its table (issue 53): reply times by the state the agent
// was in, and the goal rows beside their targets. Plain functions: no platform imports.

export type AgentState = "awake" | "frozen" | "stopped" | "waking" | "other";

export interface Reply {
  state: AgentState;
  ms: number;
  ok: boolean;
  error?: string;
}

/** The q-quantile (0..1) of `values` by nearest rank; NaN for none. */
export function quantile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

export const secs = (ms: number) =>
  Number.isNaN(ms)
    ? "—"
    : ms === Number.POSITIVE_INFINITY
      ? "unanswered"
      : `${(ms / 1000).toFixed(1)} s`;
export const mib = (bytes: number) =>
  Number.isNaN(bytes) ? "—" : `${(bytes / 1024 ** 2).toFixed(0)} MiB`;

/** p50/p95/p99 of the answered messages, per state and in all. */
export function latencyRows(replies: Reply[]): Array<[string, string]> {
  const rows: Array<[string, string]> = [];
  const line = (label: string, of: Reply[]) => {
    const ms = of.filter((r) => r.ok).map((r) => r.ms);
    rows.push([
      `message → reply, ${label} (${ms.length} answered, ${of.length - ms.length} failed)`,
      `p50 ${secs(quantile(ms, 0.5))}, p95 ${secs(quantile(ms, 0.95))}, p99 ${secs(quantile(ms, 0.99))}`,
    ]);
  };
  line("all", replies);
  for (const state of ["awake", "frozen", "stopped", "waking", "other"] as const) {
    const of = replies.filter((r) => r.state === state);
    if (of.length) line(state, of);
  }
  return rows;
}

export interface Goal {
  name: string;
  value: string;
  target: string;
  met: boolean;
}

export interface GoalInputs {
  replies: Reply[];
  /** Each sample's mean RAM per frozen sleeper (resident + share of the compressed pool). */
  sleeperSamples: number[];
  /** Each awake idle gateway's RAM at each sample. */
  awakeIdleSamples: number[];
  failedWakes: number;
}

/** The goal rows: p95 ≤ 5 s, p50 ≤ 3 s, sleeper ≤ 64 MiB, awake idle ≤ 600 MiB, 0 failed wakes. */
export function goals(input: GoalInputs): Goal[] {
  // "Every one of them answering": a message never answered counts as later than any bound.
  const ms = input.replies.map((r) => (r.ok ? r.ms : Number.POSITIVE_INFINITY));
  const p95 = quantile(ms, 0.95);
  const p50 = quantile(ms, 0.5);
  const sleeper = input.sleeperSamples.length ? Math.max(...input.sleeperSamples) : Number.NaN;
  const awake = input.awakeIdleSamples.length ? Math.max(...input.awakeIdleSamples) : Number.NaN;
  const MiB = 1024 ** 2;
  return [
    { name: "message → reply p95", value: secs(p95), target: "≤ 5 s", met: p95 <= 5_000 },
    { name: "message → reply p50", value: secs(p50), target: "≤ 3 s", met: p50 <= 3_000 },
    {
      name: "RAM per sleeper (worst sample's mean)",
      value: mib(sleeper),
      target: "≤ 64 MiB",
      met: sleeper <= 64 * MiB,
    },
    {
      name: "RAM per awake idle agent (every sample)",
      value: mib(awake),
      target: "≤ 600 MiB",
      met: awake <= 600 * MiB,
    },
    {
      name: "failed wakes",
      value: String(input.failedWakes),
      target: "0",
      met: input.failedWakes === 0,
    },
  ];
}

export function printRows(title: string, rows: Array<[string, string]>): void {
  console.warn(`\n${title}\n`);
  const width = Math.max(...rows.map(([k]) => k.length), 20);
  for (const [k, v] of rows) console.warn(`${k.padEnd(width)}  ${v}`);
}

export function printGoals(list: Goal[]): void {
  printRows(
    "Goals (issue 53)",
    list.map((g) => [
      g.name,
      `${g.value.padEnd(10)} target ${g.target}: ${g.met ? "met" : "MISSED"}`,
    ]),
  );
}
