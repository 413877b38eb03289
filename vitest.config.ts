import { defineConfig } from "vitest/config";
import GatewaysFirstSequencer from "./test/setup/sequencer.ts";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: ["test/e2e/**", "node_modules/**"],
    globalSetup: ["test/setup/global-db.ts"],
    setupFiles: ["test/setup/per-file.ts"],
    pool: "forks",
    // Three files at a time, the gateway files first (decisions 0098, 0191): on this 2-core
    // machine two workers left the CPU 15 % idle (one file waiting on Docker or a swarm while
    // the other booted one gateway); with three it is 4 % idle, 593 s against 666 s.
    maxWorkers: 3,
    sequence: { sequencer: GatewaysFirstSequencer },
    // expect.poll waits on conditions (jobs, containers); a loaded 2-core CI needs more than 1 s.
    expect: { poll: { timeout: 20_000, interval: 50 } },
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
