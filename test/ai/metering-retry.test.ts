import postgres from "postgres";
import { afterAll, beforeAll, expect, it } from "vitest";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import { flushMetering } from "../../app/server/ai/metering.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { call } from "../helpers/api.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import { balanceOf, giveCredits, leaseTestUser } from "./support.ts";
import { holdUsageTable, waitingFlush } from "./usage-lock.ts";

// The soak (issue 52) found the ledger 24 micro-USD short of the provider's usage: one answered
// call was never recorded. Usage is written after the answer (decision 0025), and a write that
// failed because the database was unreachable (restarting, its connection killed) dropped its
// calls. Such a write is now tried again, with the same rows, until the database answers.

const openai = createOpenAiFake();
beforeAll(() => mswServer.use(...openai.handlers));
const other = postgres(process.env.DATABASE_URL as string, { max: 2, onnotice: () => {} });
afterAll(() => other.end({ timeout: 1 }));

it("writes the usage of a flush whose connection died once the database answers, exactly once", async () => {
  const { userId, token } = await leaseTestUser(openai, "meter_retry");
  await giveCredits(userId, 1_000_000);
  // Usage rows held back by another transaction's lock: the flush waits there, and its backend
  // is killed there (as a database restart kills it). Reads (the call's checks) go on.
  const lock = await holdUsageTable(other);
  const answer = await call(completionsRoute, "/api/ai/v1/chat/completions", {
    method: "POST",
    body: { model: "openai/gpt-4o", messages: [{ role: "user", content: "hi" }], max_tokens: 50 },
    headers: { authorization: `Bearer ${token}` },
  });
  expect(answer.status).toBe(200);
  await expect.poll(() => waitingFlush(other), { timeout: 10_000 }).toBeDefined();
  const first = (await waitingFlush(other)) as number;
  await other`select pg_terminate_backend(${first})`;
  // Written again (a new backend waits to insert), not dropped.
  await expect
    .poll(
      async () => {
        const pid = await waitingFlush(other);
        return pid !== undefined && pid !== first;
      },
      { timeout: 10_000 },
    )
    .toBe(true);
  await lock.release();
  await flushMetering();

  const usage = await db()<{ cost: number; n: number }[]>`
    select coalesce(sum(cost_micro_usd), 0)::int as cost, count(*)::int as n
    from ai_usage where user_id = ${userId}`;
  expect(usage[0]).toEqual({ cost: 100, n: 1 }); // leaseTestUser: 100 micro-USD a call
  expect(await balanceOf(userId)).toBe(1_000_000 - 100);
  // One completion served (the catalog's model listing is the fake's other call).
  expect(openai.state.calls.filter((c) => c.url.endsWith("/chat/completions"))).toHaveLength(1);
});
