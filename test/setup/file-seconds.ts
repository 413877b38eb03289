import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { z } from "zod";

// Refreshes file-seconds.json from vitest's results cache after a full run (`.ci/run`): the
// seconds of every file that took 5 s or more, rounded, so the sequencer can start the longest
// real-gateway files first on a checkout that has no cache of its own (decision 0182). The
// cache's durations are whole files, hooks included; a JSON report's are not (a file that boots
// its gateway in beforeAll looked short there).
//   node test/setup/file-seconds.ts [node_modules/.vite/vitest/<hash>/results.json]

const Cache = z.object({
  projects: z.record(
    z.string(),
    z.object({ files: z.record(z.string(), z.object({ duration: z.number().optional() })) }),
  ),
});

const here = path.dirname(new URL(import.meta.url).pathname);
const root = path.resolve(here, "../..");
const cacheDir = path.join(root, "node_modules/.vite/vitest");
const source =
  process.argv[2] ??
  path.join(cacheDir, readdirSync(cacheDir).find((d) => !d.endsWith(".TAG")) ?? "", "results.json");
const cache = Cache.parse(JSON.parse(readFileSync(source, "utf8")));
const seconds = Object.fromEntries(
  Object.values(cache.projects)
    .flatMap((p) => Object.entries(p.files))
    .map(([file, r]) => [file, Math.round((r.duration ?? 0) / 1000)] as const)
    // The unit suite's files (the end-to-end suite keeps vitest's order).
    .filter(([file, s]) => s >= 5 && file.endsWith(".test.ts"))
    .sort((a, b) => b[1] - a[1]),
);
const target = path.join(here, "file-seconds.json");
const { about } = z.object({ about: z.string() }).parse(JSON.parse(readFileSync(target, "utf8")));
writeFileSync(target, `${JSON.stringify({ about, seconds }, null, 2)}\n`);
process.stdout.write(`${Object.keys(seconds).length} files written to ${target}\n`);
