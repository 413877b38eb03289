import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, expect, it } from "vitest";
import { recoverMeteringJournals } from "../../app/server/ai/metering.server.ts";
import { MeteringJournal, pendingIn } from "../../app/server/ai/metering-journal.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { ensureUser } from "../helpers/users.ts";
import { balanceOf, giveCredits, usageRecord } from "./support.ts";
import { holdUsageTable, waitingFlush } from "./usage-lock.ts";

// The soak (issue 52) found the ledger 24 micro-USD short of the provider's usage after a web
// process was killed: usage is written after the answer, and the process died before its write
// committed. Each metered call is now journalled on disk first (decision 0245); the next process
// to start writes what a dead one had not, once.

const USER = "usr_meter_journal";
const other = postgres(process.env.DATABASE_URL as string, { max: 2, onnotice: () => {} });
const dataDir = mkdtempSync(path.join(tmpdir(), "metering-journal-"));
const journals = () => readdirSync(path.join(dataDir, "metering"));

beforeAll(() => {
  process.env.DATA_DIR = dataDir;
  resetEnvCache();
});
afterAll(async () => {
  await other.end({ timeout: 1 });
  rmSync(dataDir, { recursive: true, force: true });
  delete process.env.DATA_DIR;
  resetEnvCache();
});

it("writes, once, a call that a process killed before its usage write had answered", async () => {
  await ensureUser(USER);
  await giveCredits(USER, 1_000_000);
  // The usage table locked: the process's write waits there when it is killed.
  const lock = await holdUsageTable(other);

  const child = spawn(
    process.execPath,
    [path.join(import.meta.dirname, "meter-and-hang.ts"), USER],
    {
      env: { ...process.env, DATA_DIR: dataDir },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const exited = new Promise((r) => child.once("exit", r));
  await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
  await expect.poll(() => waitingFlush(other), { timeout: 20_000 }).toBeDefined();
  // The call is on disk before the write: the journal names it, not yet done.
  const [file] = journals();
  expect(file).toMatch(new RegExp(`^${child.pid}\\.[0-9a-f]+\\.jsonl$`));
  child.kill("SIGKILL");
  await exited;
  await other`select pg_terminate_backend(${(await waitingFlush(other)) as number})`;
  await lock.release();
  expect(
    (await db()`select 1 from ai_usage where user_id = ${USER}`).length,
    "nothing written by the killed process",
  ).toBe(0);

  expect(await recoverMeteringJournals()).toBe(1);
  const usage = await db()<{ cost: number; n: number }[]>`
    select coalesce(sum(cost_micro_usd), 0)::int as cost, count(*)::int as n
    from ai_usage where user_id = ${USER}`;
  expect(usage[0]).toEqual({ cost: 1234, n: 1 });
  expect(await balanceOf(USER)).toBe(1_000_000 - 1234);
  // Taken over and finished: the dead process's journal is gone, and a second start adds nothing.
  expect(journals().filter((name) => !name.startsWith(`${process.pid}.`))).toEqual([]);
  expect(await recoverMeteringJournals()).toBe(0);
  expect(await balanceOf(USER)).toBe(1_000_000 - 1234);
});

it("leaves out the calls of an account deleted since, and writes the others", async () => {
  const kept = "usr_meter_journal_kept";
  await ensureUser(kept);
  await giveCredits(kept, 1_000_000);
  // A process that has exited: its pid is free (reused at worst by a later one, then skipped).
  const gone = spawnSync(process.execPath, ["-e", ""]).pid as number;
  const record = (userId: string) => usageRecord(userId, 500, "chat");
  const line = (id: string, userId: string) =>
    JSON.stringify({ call: { id, at: new Date().toISOString(), record: record(userId) } });
  writeFileSync(
    path.join(dataDir, "metering", `${gone}.feed.jsonl`),
    `${line("aiu_kept", kept)}\n${line("aiu_gone", "usr_deleted_since")}\n`,
  );
  expect(await recoverMeteringJournals()).toBe(1);
  expect(await balanceOf(kept)).toBe(1_000_000 - 500);
  expect(await db()`select id from ai_usage where id in ('aiu_kept', 'aiu_gone')`).toEqual([
    { id: "aiu_kept" },
  ]);
});

it("reads a journal's calls not marked done, past a torn last line", () => {
  const call = (id: string) =>
    JSON.stringify({ call: { id, at: "2026-12-06T00:00:00Z", record: {} } });
  const text = [
    call("a"),
    call("b"),
    JSON.stringify({ done: ["a"] }),
    call("c"),
    '{"call":{"id":"d"',
  ].join("\n");
  expect(pendingIn(text).map((c) => c.id)).toEqual(["b", "c"]);
});

it("compacts a long journal to the calls in flight, and appends at its start once emptied", () => {
  const journal = new MeteringJournal<{ pad: string }>();
  const pad = "x".repeat(64 * 1024);
  const call = (id: string) => ({ id, at: "2026-12-06T00:00:00Z", record: { pad } });
  for (let i = 0; i < 70; i++) journal.append(call(`c${i}`)); // past 4 MiB
  journal.compact([call("c69")]);
  const file = journal.file as string;
  expect(pendingIn(readFileSync(file, "utf8")).map((c) => c.id)).toEqual(["c69"]);
  journal.compact([]);
  journal.append(call("after"));
  const text = readFileSync(file, "utf8");
  expect(text.startsWith('{"call"')).toBe(true);
  expect(pendingIn(text).map((c) => c.id)).toEqual(["after"]);
});
