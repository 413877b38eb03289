import postgres from "postgres";
import { afterAll, expect, it } from "vitest";

// postgres.js 3.4.9 writes a transaction's ROLLBACK (and a released reserved connection's next
// query) on a socket its backend has closed: the write is deferred with setImmediate and then
// dereferences the null socket, an uncaught TypeError that ends the process (upstream
// porsager/postgres#1154, #1199, #1208). The soak (issue 52) saw the worker exit with it when
// the embedded PostgreSQL was killed mid-transaction. The project patches the write
// (scripts/patch-dependencies.ts, decision 0236); without it this file fails with an
// unhandled error.

const url = process.env.DATABASE_URL as string;
const clients: postgres.Sql[] = [];
/** A pool of its own per test: a connection a test killed keeps nothing for the next. */
const pool = (max: number) => {
  const sql = postgres(url, { max, onnotice: () => {} });
  clients.push(sql);
  return sql;
};
afterAll(async () => {
  await Promise.all(clients.map((c) => c.end({ timeout: 1 })));
});

/** Resolves once every callback queued by setImmediate so far has run (the deferred write). */
const afterImmediates = () => new Promise((resolve) => setImmediate(() => setImmediate(resolve)));

it("a transaction whose backend dies rejects as closed, and nothing else fails", async () => {
  const [sql, killer] = [pool(2), pool(1)];
  let pid: number | undefined;
  const tx = sql.begin(async (t) => {
    const [row] = await t<{ pid: number }[]>`select pg_backend_pid() as pid`;
    pid = row?.pid;
    await t`select pg_sleep(5)`;
  });
  await expect.poll(() => pid).toBeDefined();
  await killer`select pg_terminate_backend(${pid as number})`;
  await expect(tx).rejects.toMatchObject({ code: expect.stringMatching(/CONNECTION|57P01/) });
  await afterImmediates();
  // The pool goes on with a new connection.
  expect((await sql<{ one: number }[]>`select 1 as one`)[0]?.one).toBe(1);
});

it("a reserved connection whose backend died can be released, and the pool goes on", async () => {
  const [sql, killer] = [pool(1), pool(1)];
  const reserved = await sql.reserve();
  const [row] = await reserved<{ pid: number }[]>`select pg_backend_pid() as pid`;
  const sleeping = reserved`select pg_sleep(5)`.catch((e: unknown) => e);
  await killer`select pg_terminate_backend(${row?.pid as number})`;
  expect(await sleeping).toMatchObject({
    code: expect.stringMatching(/CONNECTION|57P01|ECONNRESET/),
  });
  reserved.release();
  await afterImmediates();
  // The pool connects again. The first query may still meet the dead backend's last error
  // (postgres.js keeps its ErrorResponse on the connection); it answers within a second try.
  const answers: unknown[] = [];
  for (let attempt = 0; attempt < 2 && answers.at(-1) !== 1; attempt++) {
    answers.push(
      await Promise.race([
        sql<{ one: number }[]>`select 1 as one`.then(
          (r) => r[0]?.one,
          (e: unknown) => (e as Error).message,
        ),
        new Promise((resolve) => setTimeout(() => resolve("no answer within 10 s"), 10_000)),
      ]),
    );
  }
  expect(answers.at(-1), JSON.stringify(answers)).toBe(1);
});
