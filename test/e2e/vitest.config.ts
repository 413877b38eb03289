import { defineConfig } from "vitest/config";
import GatewaysFirstSequencer from "../setup/sequencer.ts";

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
    // Two files at a time, the real-gateway ones first and longest first (decisions 0182,
    // 0184): a gateway boots at one CPU, and one file at a time left the other core idle
    // (218 s against 327 s on this 2-core machine).
    maxWorkers: 2,
    sequence: { sequencer: GatewaysFirstSequencer },
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
