import { describe, expect, it } from "vitest";
import { closeDb, db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { withSessionLock } from "../../app/server/platform/session-lock.server.ts";
import { tryInstanceLock, withInstanceLock } from "../../worker/instances/lock.ts";

// Found by the soak (issue 52, decision 0218): PostgreSQL restarted while a worker held an
// instance's lock for a provision, and the unlock on the dead reserved connection crashed the
// worker with an uncaught TypeError from postgres.js (porsager/postgres#1208). A lock whose
// session died is gone with it: nothing more is sent on that connection.

/** Ends the session that holds the advisory lock (as a database restart would) from another. */
async function killLockHolder(): Promise<void> {
  const holders = await db()<{ pid: number }[]>`
    select l.pid from pg_locks l join pg_stat_activity a on a.pid = l.pid
    where l.locktype = 'advisory' and l.granted and a.datname = current_database()`;
  expect(holders).toHaveLength(1);
  await db()`select pg_terminate_backend(${holders[0]?.pid ?? 0})`;
}

describe("session locks", () => {
  it("survive their session dying under them, and the lock is free afterwards", async () => {
    const result = await withSessionLock({ hashtext: "test:dies" }, async (lock) => {
      await killLockHolder();
      // The client sees its connection close: wait for it, as a long operation would.
      await expect.poll(() => lock.lost, { timeout: 10_000 }).toBe(true);
      return "done";
    });
    expect(result).toBe("done");
    // The pool still answers, and another session takes the lock at once.
    expect(await db()`select 1 as one`).toEqual([{ one: 1 }]);
    expect(
      await withSessionLock({ hashtext: "test:dies" }, async () => "again", { wait: false }),
    ).toBe("again");
  });

  it("keep an instance's operation going when the database drops its lock's connection", async () => {
    const outcome = await withInstanceLock("ins_lock_dies", async (lock) => {
      await killLockHolder();
      await expect.poll(() => lock.lost, { timeout: 10_000 }).toBe(true);
      return "provisioned";
    });
    expect(outcome).toBe("provisioned");
    expect(await tryInstanceLock("ins_lock_dies", async () => "free")).toBe("free");
  });

  it("skip when another session holds the lock, and release it after use", async () => {
    const inner = await withSessionLock({ id: 4242 }, () =>
      withSessionLock({ id: 4242 }, async () => "never", { wait: false }),
    );
    expect(inner).toBeUndefined();
    expect(await withSessionLock({ id: 4242 }, async () => "free", { wait: false })).toBe("free");
  });

  // The soak (decision 0237): a burst of wake jobs took the worker's ten pooled connections for
  // instance locks, held or waited for, and each holder's own queries then waited for a pooled
  // connection for good. Locks live on their own pool now and a waiter holds no connection.
  it("let many operations on few instances all finish with a query pool of two", async () => {
    await closeDb();
    process.env.DATABASE_POOL_MAX = "2";
    process.env.DATABASE_LOCK_POOL_MAX = "2";
    resetEnvCache();
    try {
      const done: string[] = [];
      const operations = Array.from({ length: 8 }, (_, i) =>
        withInstanceLock(`ins_burst_${i % 3}`, async () => {
          await db()`select pg_sleep(0.02)`;
          const [row] = await db()<{ n: number }[]>`select ${i}::int as n`;
          done.push(`op ${row?.n}`);
        }),
      );
      const all = Promise.all(operations).then(() => "all done");
      const stuck = new Promise((resolve) => setTimeout(() => resolve("stuck"), 20_000));
      expect(await Promise.race([all, stuck])).toBe("all done");
      expect(done).toHaveLength(8);
    } finally {
      await closeDb();
      delete process.env.DATABASE_POOL_MAX;
      delete process.env.DATABASE_LOCK_POOL_MAX;
      resetEnvCache();
    }
  });
});
