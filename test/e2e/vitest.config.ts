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
    // Two files at a time (218–313 s against 327 s one at a time): each file has its own
    // database, server, Docker labels and browser, and its page reads wait for what they read
    // (decision 0184, amended).
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
