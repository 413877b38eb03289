import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { z } from "zod";

// Refreshes file-seconds.json from a vitest JSON report (`.ci/run` writes .data/ci/unit.json):
// the seconds of every file that took 5 s or more, rounded, so the sequencer can start the
// longest real-gateway files first on a checkout that has no vitest cache (decision 0182).
//   node test/setup/file-seconds.ts .data/ci/unit.json

const Report = z.object({
  testResults: z.array(z.object({ name: z.string(), startTime: z.number(), endTime: z.number() })),
});

const here = path.dirname(new URL(import.meta.url).pathname);
const root = path.resolve(here, "../..");
const report = Report.parse(JSON.parse(readFileSync(process.argv[2] ?? "", "utf8")));
const seconds = Object.fromEntries(
  report.testResults
    .map(
      (f) => [path.relative(root, f.name), Math.round((f.endTime - f.startTime) / 1000)] as const,
    )
    .filter(([, s]) => s >= 5)
    .sort((a, b) => b[1] - a[1]),
);
const target = path.join(here, "file-seconds.json");
const { about } = z.object({ about: z.string() }).parse(JSON.parse(readFileSync(target, "utf8")));
writeFileSync(target, `${JSON.stringify({ about, seconds }, null, 2)}\n`);
process.stdout.write(`${Object.keys(seconds).length} files written to ${target}\n`);
