import { afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import { userStanding } from "../../app/server/ai/budgets.server.ts";
import { activeLease, type Lease } from "../../app/server/ai/credit-leases.server.ts";
import { authenticateInstanceToken } from "../../app/server/ai/instance-tokens.server.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { sha256Hex } from "../../app/server/platform/crypto.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { call } from "../helpers/api.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import { balanceOf, giveCredits, leaseTestUser } from "./support.ts";

// Work that used to wait on the database inside a request now happens ahead of need, in the
// background (docs/decisions/0086): the next credit block is taken while the current one still
// serves calls, and a cached token identity is re-read before it expires. The bounds stay: the
// totals are exact, and a revocation takes effect within the cache's 5 s.

const openai = createOpenAiFake();
beforeAll(() => mswServer.use(...openai.handlers));

let userId: string;
let instanceId: string;
let token: string;
beforeEach(async () => {
  ({ userId, instanceId, token } = await leaseTestUser(openai, "ahead"));
});
afterEach(() => {
  vi.useRealTimers();
});

const complete = () =>
  call(completionsRoute, "/api/ai/v1/chat/completions", {
    method: "POST",
    body: { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }], max_tokens: 50 },
    headers: { authorization: `Bearer ${token}` },
  });

describe("credit lease refill ahead of need", () => {
  it("takes the next block while the current lease can still serve calls", async () => {
    await giveCredits(userId, 1_000_000);
    expect((await complete()).status).toBe(200);
    const first = activeLease(userId, "credits") as Lease;
    let calls = 1;
    // Sequential calls (each gives back what it did not cost) until a new block replaces it.
    while (activeLease(userId, "credits") === first && calls < 200) {
      expect((await complete()).status).toBe(200);
      calls += 1;
    }
    // Replaced ahead of need: the first block could still have served more calls.
    expect(first.available).toBeGreaterThan(0);
    // Not before it ran low (a quarter of the block), but well before it ran out (~95 calls).
    expect(first.available).toBeLessThan(first.size * 0.25 + 1_000);
    expect(first.retired).toBe(true);
    expect(calls).toBeLessThan(first.size / 100);
    expect((await complete()).status).toBe(200); // served by the new lease
    calls += 1;
    await flushMetering();
    expect(await balanceOf(userId)).toBe(1_000_000 - calls * 100);
    // Both blocks given back once idle: nothing stays held.
    expect((await userStanding(userId)).held).toBe(0);
  });

  it("keeps serving from the current lease when the balance cannot cover another block", async () => {
    // 1.5 blocks: the refill of a full block is refused, the calls still go through.
    await giveCredits(userId, 15_000);
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push((await complete()).status);
    expect(statuses.every((s) => s === 200)).toBe(true);
    await flushMetering();
    expect(await balanceOf(userId)).toBe(15_000 - 20 * 100);
    expect((await userStanding(userId)).held).toBe(0);
  });
});

describe("instance token cache refresh ahead", () => {
  const revokeElsewhere = () =>
    // Another web process revoking: this process's cache is not cleared.
    db()`update ai_instance_tokens set revoked_at = now() where token_hash = ${sha256Hex(token)}`;

  it("re-reads an entry past half its life in the background and sees a revocation", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    expect(await authenticateInstanceToken(token)).toMatchObject({ userId, instanceId });
    await revokeElsewhere();
    vi.setSystemTime(Date.now() + 3_000);
    // Still within the 5 s bound: served from the cache, and the re-read starts.
    expect(await authenticateInstanceToken(token)).toMatchObject({ userId, instanceId });
    await expect.poll(() => authenticateInstanceToken(token)).toBeUndefined();
  });

  it("never serves an entry older than 5 s", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    expect(await authenticateInstanceToken(token)).toMatchObject({ userId, instanceId });
    await revokeElsewhere();
    vi.setSystemTime(Date.now() + 5_001);
    expect(await authenticateInstanceToken(token)).toBeUndefined();
  });

  it("a revocation in this process wins over a read in flight", async () => {
    const reading = authenticateInstanceToken(token); // a cache miss: reads the row
    await db()`update ai_instance_tokens set revoked_at = now() where instance_id = ${instanceId}`;
    const { revokeInstanceTokens } = await import("../../app/server/ai/instance-tokens.server.ts");
    await revokeInstanceTokens(instanceId);
    await reading;
    expect(await authenticateInstanceToken(token)).toBeUndefined();
  });
});
