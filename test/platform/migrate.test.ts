import { mkdtemp, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { db } from "../../app/server/platform/db.server.ts";
import { migrate } from "../../db/migrate.ts";

describe("migrations", () => {
  const extra: postgres.Sql[] = [];
  afterAll(async () => {
    await Promise.all(extra.map((s) => s.end()));
  });

  it("re-running on a migrated database applies nothing", async () => {
    const before = await db()`select name, applied_at from schema_migrations order by name`;
    expect(before.map((r) => r.name)).toContain("0001_init.sql");
    expect(await migrate(db())).toEqual({ applied: [] });
    const after = await db()`select name, applied_at from schema_migrations order by name`;
    expect(after).toEqual(before);
  });

  it("applies new files in order, once, even when two processes race", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "migrations-"));
    await writeFile(path.join(dir, "0001_a.sql"), "create table mig_a (id int);");
    await writeFile(path.join(dir, "0002_b.sql"), "insert into mig_a values (1);");
    const other = postgres(process.env.DATABASE_URL!, { max: 2, onnotice: () => {} });
    extra.push(other);
    const results = await Promise.all([migrate(db(), dir), migrate(other, dir)]);
    expect(results.flatMap((r) => r.applied).sort()).toEqual(["0001_a.sql", "0002_b.sql"]);
    const [row] = await db()`select count(*)::int as n from mig_a`;
    expect(row?.n).toBe(1);
  });

  it("rolls a failing file back whole and stops there", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "migrations-"));
    await writeFile(path.join(dir, "0001_ok.sql"), "create table mig_ok (id int);");
    await writeFile(
      path.join(dir, "0002_bad.sql"),
      "create table mig_half (id int); select * from no_such_table;",
    );
    await writeFile(path.join(dir, "0003_later.sql"), "create table mig_later (id int);");
    await expect(migrate(db(), dir)).rejects.toThrow(/0002_bad.sql failed/);
    const tables = await db()`
      select table_name from information_schema.tables
      where table_name in ('mig_ok', 'mig_half', 'mig_later')`;
    expect(tables.map((t) => t.table_name)).toEqual(["mig_ok"]);
    const [row] =
      await db()`select count(*)::int as n from schema_migrations where name = '0002_bad.sql'`;
    expect(row?.n).toBe(0);
  });
});
