import { defineConfig } from "vitest/config";

// Browser and whole-server tests: the built app (`npm run build`) served by the real server
// entry, driven over HTTP and with Debian's Chromium.
export default defineConfig({
  test: {
    include: ["test/e2e/**/*.e2e.ts"],
    globalSetup: ["test/setup/global-db.ts"],
    setupFiles: ["test/setup/per-file.ts"],
    pool: "forks",
    // expect.poll waits on conditions (jobs, containers); a loaded 2-core CI needs more than 1 s.
    expect: { poll: { timeout: 20_000, interval: 50 } },
    // Two files at a time: a gateway boots at one CPU, and one file at a time left the other
    // core idle (327 s in CI). vitest's own order (the last run's durations, else the larger
    // file first) took 218 s here; the unit suite's gateway-first order, two gateway files side
    // by side, took 258 s: the boots then compete for the cores (decision 0184).
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
