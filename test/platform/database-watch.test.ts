import { readFile } from "node:fs/promises";
import path from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  type DatabaseWatchEvent,
  keepDatabaseRunning,
} from "../../app/server/platform/database-watch.server.ts";
import { startTestCluster, stopTestCluster, type TestCluster } from "../setup/cluster.ts";

// `npm start`'s embedded PostgreSQL killed under the platform (issue 52's soak: nothing started
// it again): the watch starts it again on the same port, so the URL web and worker hold works.

let tc: TestCluster;
beforeAll(async () => {
  tc = await startTestCluster();
}, 120_000);
afterAll(async () => {
  if (tc) await stopTestCluster(tc);
});

async function selectOne(url: string): Promise<number> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    const [row] = await sql<{ ok: number }[]>`select 1 as ok`;
    return row?.ok ?? 0;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

it("starts a killed embedded server again on its port; the URL handed out works again", async () => {
  const events: DatabaseWatchEvent[] = [];
  const watch = keepDatabaseRunning(tc.cluster, {
    intervalMs: 100,
    onEvent: (event) => events.push(event),
  });
  try {
    expect(await selectOne(tc.adminUrl)).toBe(1);
    // postmaster.pid, line 1: the server's pid.
    const pid = Number(
      (await readFile(path.join(tc.dir, "data", "postmaster.pid"), "utf8")).split("\n")[0],
    );
    process.kill(pid, "SIGKILL");
    await expect.poll(() => events.map((e) => e.kind), { timeout: 60_000 }).toContain("restarted");
    expect(events[0]).toEqual({ kind: "down" });
    expect(await tc.cluster.running()).toBe(true);
    expect(await selectOne(tc.adminUrl)).toBe(1);
  } finally {
    watch.stop();
  }
}, 90_000);
