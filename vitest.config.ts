import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: ["test/e2e/**", "node_modules/**"],
    globalSetup: ["test/setup/global-db.ts"],
    setupFiles: ["test/setup/per-file.ts"],
    pool: "forks",
    // expect.poll waits on conditions (jobs, containers); a loaded 2-core CI needs more than 1 s.
    expect: { poll: { timeout: 20_000, interval: 50 } },
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
