import { readFile } from "node:fs/promises";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import { reserve, userStanding } from "../../app/server/ai/budgets.server.ts";
import { flushMetering, meter } from "../../app/server/ai/metering.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { call } from "../helpers/api.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import { balanceOf, giveCredits, leaseTestUser, usageRecord } from "./support.ts";

// Credit leases: a process holds a block of the user's credit and draws calls from it, so the
// request path does not write per call; settlement is batched; the totals stay exact and the
// unused part of a block goes back.

const openai = createOpenAiFake();
beforeAll(() => mswServer.use(...openai.handlers));

let userId: string;
let token: string;
beforeEach(async () => {
  ({ userId, token } = await leaseTestUser(openai, "lease"));
});

const complete = () =>
  call(completionsRoute, "/api/ai/v1/chat/completions", {
    method: "POST",
    body: { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }], max_tokens: 50 },
    headers: { authorization: `Bearer ${token}` },
  });

const reservationsTaken = async () =>
  Number(
    (await db()`select count(*)::int as n from ai_usage where user_id = ${userId}`)[0]?.n ?? 0,
  );

describe("credit leases", () => {
  it("draws 40 concurrent calls from a few leases, debits exactly, gives the rest back", async () => {
    await giveCredits(userId, 1_000_000);
    const results = await Promise.all(Array.from({ length: 40 }, () => complete()));
    expect(results.every((r) => r.status === 200)).toBe(true);
    // Until settled and given back, the account shows the leases held.
    expect((await userStanding(userId)).held).toBeGreaterThan(0);

    await flushMetering();
    expect(await reservationsTaken()).toBe(40);
    expect(await balanceOf(userId)).toBe(1_000_000 - 40 * 100);
    const ledger = await db()<{ sum: number }[]>`
      select coalesce(sum(amount_micro_usd), 0)::bigint as sum from credit_ledger
      where user_id = ${userId} and reason like 'ai-usage:%'`;
    expect(Number(ledger[0]?.sum)).toBe(-40 * 100);
    const after = await userStanding(userId);
    expect(after.held).toBe(0);
    expect(after.spentToday).toBe(40 * 100);
    const left = await db()`select 1 from ai_reservations where user_id = ${userId}`;
    expect(left).toHaveLength(0);
  });

  it("never lets a user's calls exceed the balance, lease or no lease", async () => {
    // 1 000 micro-USD: a block of 10 000 is refused, so calls take exact holds; each call
    // reserves more than it costs, and the balance covers a handful of reservations only.
    await giveCredits(userId, 1_000);
    const statuses = (await Promise.all(Array.from({ length: 30 }, () => complete()))).map(
      (r) => r.status,
    );
    await flushMetering();
    const ok = statuses.filter((s) => s === 200).length;
    expect(ok).toBeGreaterThan(0);
    expect(statuses.filter((s) => s === 402)).toHaveLength(30 - ok);
    const balance = await balanceOf(userId);
    expect(balance).toBe(1_000 - ok * 100);
    expect(balance).toBeGreaterThanOrEqual(0);
    expect((await userStanding(userId)).held).toBe(0);
  });

  it("keeps working across lease rotations (a new block when one runs out)", async () => {
    await giveCredits(userId, 1_000_000);
    resetEnvCache();
    for (let i = 0; i < 5; i++) {
      const batch = await Promise.all(Array.from({ length: 30 }, () => complete()));
      expect(batch.every((r) => r.status === 200)).toBe(true);
    }
    await flushMetering();
    expect(await balanceOf(userId)).toBe(1_000_000 - 150 * 100);
    expect((await userStanding(userId)).held).toBe(0);
  });

  it("caps each user's debit at the balance in one flush, the rest recorded as uncollected", async () => {
    // Two users settled in the same flush (their account statements pipelined): one whose call
    // cost more than the balance (a provider reporting more than was reserved), one within it.
    const other = `${userId}_b`;
    await giveCredits(userId, 1_000);
    await giveCredits(other, 1_000);
    const [over, within] = [
      await reserve(userId, 800, "credits"),
      await reserve(other, 800, "credits"),
    ];
    void meter(usageRecord(userId, 1_500), over);
    void meter(usageRecord(other, 300), within);
    await flushMetering();
    const accounts = await db()<{ user_id: string; balance: number; held: number }[]>`
      select user_id, balance_micro_usd as balance, held_micro_usd as held from ai_accounts
      where user_id in (${userId}, ${other}) order by user_id`;
    expect(accounts).toEqual([
      { user_id: userId, balance: 0, held: 0 },
      { user_id: other, balance: 700, held: 0 },
    ]);
    // The account row and the ledger agree.
    expect(await balanceOf(userId)).toBe(0);
    expect(await balanceOf(other)).toBe(700);
    const rows = await db()<{ user_id: string; cost: number; uncollected: number }[]>`
      select user_id, cost_micro_usd as cost, uncollected_micro_usd as uncollected from ai_usage
      where user_id in (${userId}, ${other}) order by user_id`;
    expect(rows).toEqual([
      { user_id: userId, cost: 1_500, uncollected: 500 },
      { user_id: other, cost: 300, uncollected: 0 },
    ]);
    expect((await userStanding(userId)).spentToday).toBe(1_500);
  });
});

describe("flush lock order", () => {
  it("locks the accounts in user-id order, whatever order the calls came in", async () => {
    const [low, high] = [`${userId}_a`, `${userId}_z`];
    await giveCredits(low, 1_000_000);
    await giveCredits(high, 1_000_000);
    const reservations = [await reserve(high, 100, "credits"), await reserve(low, 100, "credits")];
    // Another process's flush holds the higher account.
    const other = await db().reserve();
    let flushed: Promise<void> | undefined;
    try {
      await other`begin`;
      await other`select 1 from ai_accounts where user_id = ${high} for update`;
      void meter(usageRecord(high, 100), reservations[0]); // the batch names the higher account first
      void meter(usageRecord(low, 100), reservations[1]);
      flushed = flushMetering();
      for (;;) {
        const waiting = await db()`select 1 from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock'`;
        if (waiting.length) break;
      }
      // The flush waits for the higher account having locked the lower one: in sorted order.
      const lowFree = await other`
        select 1 from ai_accounts where user_id = ${low} for update skip locked`;
      expect(lowFree).toHaveLength(0);
    } finally {
      await other`rollback`;
      other.release();
    }
    await flushed;
    expect(await balanceOf(low)).toBe(1_000_000 - 100);
    expect(await balanceOf(high)).toBe(1_000_000 - 100);
    expect((await userStanding(high)).held).toBe(0);
  });
});

describe("migration 0019", () => {
  const account = async (id: string) =>
    (
      await db()<{ balance: number; updated_at: Date }[]>`
        select balance_micro_usd as balance, updated_at from ai_accounts where user_id = ${id}`
    )[0];

  it("re-derives a drifted AI balance from the ledger and leaves correct ones alone", async () => {
    await giveCredits(userId, 2_000_000, `led_${userId}_a`);
    await giveCredits(userId, -500_000, `led_${userId}_b`);
    const other = `${userId}_ok`;
    await giveCredits(other, 750_000);
    // What the double debit left behind (decision 0088): the account ran ahead of its ledger.
    await db()`update ai_accounts set balance_micro_usd = 100000 where user_id = ${userId}`;
    const before = await account(other);
    const sql = await readFile(
      new URL("../../db/migrations/0019_ai_balance_from_ledger.sql", import.meta.url),
      "utf8",
    );
    await db().unsafe(sql);
    expect((await account(userId))?.balance).toBe(1_500_000);
    expect(await account(other)).toEqual(before); // untouched
  });
});
