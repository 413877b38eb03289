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
    // One file at a time. Two at a time took 218–258 s instead of 327 s, but in CI it showed
    // tests that race a page still loading under load (control-ui, then security); until they
    // are hardened, the suite stays serial (decision 0184).
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
