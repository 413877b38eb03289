import { registry } from "../../app/server/platform/metrics/registry.server.ts";

// Reading the process's Prometheus registry in tests: a sample's value by name and labels.

type Labels = Record<string, string | number>;

/** The sum of the samples named `name` (a histogram's `_count`, `_sum`…) whose labels include `labels`. */
export async function sample(name: string, labels: Labels = {}): Promise<number> {
  let total = 0;
  for (const metric of await registry.getMetricsAsJSON()) {
    for (const v of metric.values as Array<{
      metricName?: string;
      labels: Labels;
      value: number;
    }>) {
      const sampleName = v.metricName ?? metric.name;
      if (sampleName !== name) continue;
      if (Object.entries(labels).every(([k, want]) => String(v.labels[k]) === String(want))) {
        total += v.value;
      }
    }
  }
  return total;
}

/** How many series (sample lines) the registry exposes. */
export async function seriesCount(): Promise<number> {
  const text = await registry.metrics();
  return text.split("\n").filter((line) => line && !line.startsWith("#")).length;
}
