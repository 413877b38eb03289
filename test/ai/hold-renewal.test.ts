import { afterEach, describe, expect, it } from "vitest";
import { reserve, userStanding } from "../../app/server/ai/budgets.server.ts";
import {
  HOLD_STALE_SECONDS,
  renewHolds,
  sweepStaleReservations,
} from "../../app/server/ai/hold-renewal.server.ts";
import { flushMetering, meter, type UsageRecord } from "../../app/server/ai/metering.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { jobSchedules } from "../../app/server/platform/jobs.server.ts";
import { balanceOf, giveCredits, usageRecord } from "./support.ts";

// Issue 52 (the soak): a web killed with kill -9 kept its users' credit holds for ten minutes
// (a fixed age from creation), and a small balance was refused with 402 all that time. A hold
// now lives as long as its process renews it; the sweep releases one not renewed for a minute.
// No clock is moved: the rows' timestamps are (decision 0223).

const usage = (userId: string, costMicroUsd: number): UsageRecord => ({
  ...usageRecord(userId, costMicroUsd),
  stream: true,
});

/** A hold a web process left behind when it was killed (its row and the account's held sum). */
async function orphanHold(id: string, userId: string, amount: number, renewedSecondsAgo: number) {
  await db()`insert into ai_reservations (id, user_id, amount_micro_usd, created_at, renewed_at)
    values (${id}, ${userId}, ${amount}, now() - interval '5 minutes',
      now() - make_interval(secs => ${renewedSecondsAgo}))`;
  await db()`update ai_accounts set held_micro_usd = held_micro_usd + ${amount}
    where user_id = ${userId}`;
}

const holds = async () =>
  (await db()<{ id: string }[]>`select id from ai_reservations order by id`).map((r) => r.id);

afterEach(async () => {
  await flushMetering();
  await db()`delete from ai_reservations`;
});

describe("credit holds of a dead process", () => {
  it("are released once not renewed for a minute; a live one of the same age is kept", async () => {
    const live = "usr_hold_live";
    const small = "usr_hold_small";
    await giveCredits(live, 1_000_000);
    await giveCredits(small, 59_100);
    // This process holds a lease for a call in flight: a streaming completion five minutes long.
    const call = await reserve(live, 1_000, "credits");
    await db()`update ai_reservations set created_at = now() - interval '5 minutes',
      renewed_at = now() - make_interval(secs => ${HOLD_STALE_SECONDS + 1})`;
    // A killed web's lease held the whole small balance: its calls are refused.
    await orphanHold("res_dead", small, 59_100, HOLD_STALE_SECONDS + 1);
    await expect(reserve(small, 50_000, "credits")).rejects.toMatchObject({ status: 402 });
    // And one of a web killed 45 s after its last renewal: not over the bound yet.
    await orphanHold("res_recent", "usr_hold_recent", 300, HOLD_STALE_SECONDS - 15);

    // The live process renews what it holds (its timer does every HOLD_RENEW_MS); the sweep runs.
    expect(await renewHolds()).toBe(1);
    expect(await sweepStaleReservations()).toBe(1);
    expect(await holds()).toEqual([call.id, "res_recent"].sort());
    expect((await userStanding(small)).held).toBe(0);
    // The small balance can be spent again.
    const next = await reserve(small, 50_000, "credits");
    expect(next.amountMicroUsd).toBe(50_000);
    void meter(usage(small, 0), next);

    // The live call ends and settles exactly from the hold it kept.
    void meter(usage(live, 700), call);
    await flushMetering();
    expect(await balanceOf(live)).toBe(1_000_000 - 700);
    expect((await userStanding(live)).held).toBe(0);
    expect(await balanceOf(small)).toBe(59_100);
  });

  it("forfeits a live lease whose hold was swept (its process could not renew in time)", async () => {
    const user = "usr_hold_forfeit";
    await giveCredits(user, 1_000_000);
    const call = await reserve(user, 1_000, "credits");
    // Another process of the same user holds 5 000 and renews it.
    await orphanHold("res_other", user, 5_000, 0);
    // This process could not renew for over a minute (the database was away); the sweep ran.
    await db()`update ai_reservations set renewed_at = now() - interval '2 minutes'
      where id = ${call.id}`;
    expect(await sweepStaleReservations()).toBe(1);
    expect((await userStanding(user)).held).toBe(5_000);

    // The process finds its hold gone at its next renewal; the call still settles and is charged,
    // but takes nothing from the other process's hold.
    expect(await renewHolds()).toBe(0);
    void meter(usage(user, 700), call);
    await flushMetering();
    expect(await balanceOf(user)).toBe(1_000_000 - 700);
    expect((await userStanding(user)).held).toBe(5_000);
    expect(await holds()).toEqual(["res_other"]);
  });

  it("are swept every minute", () => {
    expect(jobSchedules["sweep-credit-holds"]?.()).toBe("* * * * *");
  });
});
