// What the soak's traffic saw: one sample per request (kind, phase, latency, outcome), so the
// invariants (no 500, nothing hanging) and the latency table read the same record.

export type Phase = "before" | "during" | "after";
/** An HTTP status, or what happened instead of one. */
export type Outcome = number | "network" | "timeout";

export interface Sample {
  kind: string;
  phase: Phase;
  at: number;
  ms: number;
  outcome: Outcome;
}

export class Recorder {
  readonly samples: Sample[] = [];
  phase: Phase = "before";
  readonly started = Date.now();

  add(kind: string, at: number, outcome: Outcome): void {
    this.samples.push({ kind, phase: this.phase, at, ms: Date.now() - at, outcome });
  }
}

/** Seconds since the run began, for the event log. */
export const stamp = (rec: Recorder) =>
  `${((Date.now() - rec.started) / 1000).toFixed(1)}s`.padStart(7);

export function percentile(values: number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** p50/p99 (ms) and count of each kind's answered requests (any HTTP status) in each phase. */
export function latencyTable(samples: Sample[]): string[] {
  const kinds = [...new Set(samples.map((s) => s.kind))].sort();
  const phases: Phase[] = ["before", "during", "after"];
  const lines = [`${"kind".padEnd(18)}${phases.map((p) => p.padStart(22)).join("")}`];
  for (const kind of kinds) {
    const cells = phases.map((phase) => {
      const ms = samples
        .filter((s) => s.kind === kind && s.phase === phase && typeof s.outcome === "number")
        .map((s) => s.ms);
      const p50 = percentile(ms, 50);
      const p99 = percentile(ms, 99);
      return (p50 === undefined ? "-" : `${p50}/${p99} ms n=${ms.length}`).padStart(22);
    });
    lines.push(`${kind.padEnd(18)}${cells.join("")}`);
  }
  return lines;
}
