import { afterEach, beforeAll, describe, expect, it } from "vitest";
import * as provisionRoute from "../../app/routes/api.agents.provision.ts";
import * as billingApi from "../../app/routes/api.billing.ts";
import * as credits from "../../app/routes/api.credits.ts";
import * as billingPage from "../../app/routes/billing.tsx";
import * as pricingPage from "../../app/routes/pricing.tsx";
import { MICRO_USD_PER_CREDIT } from "../../app/server/accounts/credits.server.ts";
import { grantCredits } from "../../app/server/billing/credit-grants.server.ts";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { parseEnv, resetEnvCache } from "../../app/server/platform/env.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { as, newUser, type TestUser } from "../accounts/helpers.ts";
import { subscribe } from "../agents/support.ts";
import { useStripe, withoutStripe } from "./support.ts";

// Self-hosted mode (decision 0100): without a payment processor the platform still hosts
// agents. Plans come from DEFAULT_PLAN (computed when read) or an operator's assignment, and
// credits from operator grants; with a processor, nothing of the paid flow changes.

beforeAll(() => {
  // No worker runs here: provisioning must not wait for the instance it enqueues.
  process.env.AGENT_PROVISION_WAIT_MS = "0";
  resetEnvCache();
});

afterEach(() => {
  process.env.DEFAULT_PLAN = "none"; // the test setup's value
  delete process.env.OPERATOR_CONTACT;
  resetEnvCache();
  resetRateLimiters();
});

/** Runs `fn` with payments off and DEFAULT_PLAN as given ("" = unset: the mode's default). */
function selfHosted<T>(defaultPlan: string, fn: () => Promise<T>): Promise<T> {
  return withoutStripe(async () => {
    if (defaultPlan) process.env.DEFAULT_PLAN = defaultPlan;
    else delete process.env.DEFAULT_PLAN;
    resetEnvCache();
    return fn();
  });
}

const provision = (user: TestUser, name: string, tier?: string) =>
  as(user, provisionRoute, "/api/agents/provision", {
    method: "POST",
    body: { name, model: "custom", ...(tier ? { tier } : {}) },
  });

const billing = async (user: TestUser) =>
  (await as(user, billingApi, "/api/billing")).json as Record<string, unknown>;

describe("payments off", () => {
  it("a fresh install's user provisions on the default plan (solo), existing users included", async () => {
    // Registered before the mode applies to them: nothing is written for them, it is read.
    const earlier = await newUser();
    await selfHosted("", async () => {
      const fresh = await newUser();
      for (const user of [earlier, fresh]) {
        const res = await provision(user, "first");
        expect(res.status).toBe(201);
        expect(res.json).toMatchObject({ success: true, agent: { name: "first" } });
        // Solo covers one agent: the tier limit still holds.
        expect((await provision(user, "second")).status).toBe(429);
        expect(await billing(user)).toMatchObject({
          plan: "solo",
          planSource: "default",
          selfHosted: true,
          limits: { agentThreads: 1 },
          operator: { assignedPlan: null, defaultPlan: "solo" },
        });
      }
      const rows =
        await db()`select 1 from plan_assignments where user_id in ${db()([earlier.id, fresh.id])}`;
      expect(rows).toHaveLength(0);
    });
  });

  it("DEFAULT_PLAN=none keeps 402 until an operator assigns a plan; `none` and `default` assignments", async () => {
    await selfHosted("none", async () => {
      const user = await newUser();
      const refused = await provision(user, "first");
      expect(refused.status).toBe(402);
      expect(refused.json.error).toMatch(/ask its operator/);

      expect(await assignPlan(user.id, "collective", "usr_operator1")).toEqual({
        plan: "collective",
        previous: "none",
        source: "assigned",
      });
      expect((await provision(user, "one", "pro")).status).toBe(201);
      expect(await billing(user)).toMatchObject({ plan: "collective", planSource: "assigned" });
      const [entry] = await db()`
        select kind, item, from_status, to_status, detail, reference from billing_ledger
        where user_id = ${user.id}`;
      expect(entry).toMatchObject({
        kind: "assignment",
        item: "collective",
        from_status: "none",
        to_status: "collective",
        reference: "operator:usr_operator1",
      });

      await assignPlan(user.id, "default", "usr_operator1");
      expect((await provision(user, "two")).status).toBe(402);
      expect(await billing(user)).toMatchObject({ plan: "free", planSource: "none" });
    });
    // An explicit `none` withholds the default plan too.
    await selfHosted("", async () => {
      const user = await newUser();
      await assignPlan(user.id, "none", "usr_operator1");
      expect((await provision(user, "first")).status).toBe(402);
    });
  });

  it("assignPlan refuses an unknown plan (400) and an unknown user (404)", async () => {
    const user = await newUser();
    await expect(assignPlan(user.id, "gold" as "solo", "op")).rejects.toMatchObject({
      status: 400,
    });
    await expect(assignPlan("usr_nobody", "solo", "op")).rejects.toMatchObject({ status: 404 });
    await expect(assignPlan(user.id, "solo", "")).rejects.toMatchObject({ status: 400 });
  });

  it("grantCredits writes integer micro-USD once per key; /api/credits shows it with its reason", async () => {
    const user = await newUser();
    const first = await grantCredits(user.id, 2_500_000, "Welcome to the beta", "usr_op", "k-1");
    expect(first).toMatchObject({ microUsd: 2_500_000, created: true, grantedBy: "usr_op" });
    const again = await grantCredits(user.id, 2_500_000, "Welcome to the beta", "usr_op", "k-1");
    expect(again).toMatchObject({ id: first.id, created: false });
    await expect(
      grantCredits(user.id, 3_000_000, "Welcome to the beta", "usr_op", "k-1"),
    ).rejects.toMatchObject({ status: 409 });
    for (const amount of [0, -1, 1.5, Number.MAX_SAFE_INTEGER]) {
      await expect(
        grantCredits(user.id, amount, "x", "usr_op", `bad-${amount}`),
      ).rejects.toMatchObject({ status: 400 });
    }
    await expect(grantCredits("usr_nobody", 1, "x", "usr_op", "k-2")).rejects.toMatchObject({
      status: 404,
    });
    const shown = await as(user, credits, "/api/credits");
    expect(shown.json.balance).toBe(2.5);
    expect(shown.json.entries).toEqual([
      expect.objectContaining({ amount: 2.5, reason: "grant", note: "Welcome to the beta" }),
    ]);
    const [ai] = await db()<{ balance: string }[]>`
      select balance_micro_usd::text as balance from ai_accounts where user_id = ${user.id}`;
    expect(Number(ai?.balance)).toBe(2.5 * MICRO_USD_PER_CREDIT); // the AI layer can spend it
  });

  it("/pricing and /billing say how it works here instead of offering checkouts", async () => {
    await selfHosted("", async () => {
      process.env.OPERATOR_CONTACT = "ops@example.com";
      resetEnvCache();
      const pricing = (pricingPage.loader as () => ReturnType<typeof pricingPage.loader>)();
      expect(pricing.selfHosted).toEqual({ contact: "ops@example.com", defaultPlan: "solo" });
      const user = await newUser();
      const request = new Request("http://localhost/billing", { headers: { cookie: user.cookie } });
      const data = (await billingPage.loader({ request, params: {}, context: {} })) as Awaited<
        ReturnType<typeof billingPage.loader>
      >;
      expect(data.summary).toMatchObject({
        selfHosted: true,
        paymentsConfigured: false,
        plan: "solo",
        operator: { contact: "ops@example.com" },
      });
    });
  });
});

describe("payments on (a processor configured)", () => {
  it("DEFAULT_PLAN plays no part: a new user is 402 until subscribed; an assignment still counts", async () => {
    useStripe();
    const user = await newUser();
    expect((await provision(user, "first")).status).toBe(402);
    expect(await billing(user)).toMatchObject({ plan: "free", selfHosted: false });
    await subscribe(user.id, "solo");
    expect((await provision(user, "first")).status).toBe(201);
    const comped = await newUser();
    await assignPlan(comped.id, "label", "usr_op");
    expect((await provision(comped, "first")).status).toBe(201);
  });

  it("the server refuses to start with a free default plan next to a processor", () => {
    expect(() => parseEnv({ STRIPE_SECRET_KEY: "sk_test_x", DEFAULT_PLAN: "solo" })).toThrow(
      /DEFAULT_PLAN=solo is for servers without payments/,
    );
    expect(parseEnv({ STRIPE_SECRET_KEY: "sk_test_x" }).DEFAULT_PLAN).toBe("none");
    expect(parseEnv({}).DEFAULT_PLAN).toBe("solo");
    expect(() => parseEnv({ DEFAULT_PLAN: "gold" })).toThrow(/DEFAULT_PLAN/);
  });
});
