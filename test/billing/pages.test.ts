import { beforeAll, describe, expect, it } from "vitest";
import * as billingPage from "../../app/routes/billing.tsx";
import * as filesPage from "../../app/routes/files.tsx";
import * as pricingPage from "../../app/routes/pricing.tsx";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import { createCheckout } from "../../app/server/billing/checkout.server.ts";
import { refreshSubscriptionFromStripe } from "../../app/server/billing/subscriptions.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { newUser, type TestUser } from "../accounts/helpers.ts";
import type { StripeFake } from "../msw/handlers/stripe.ts";
import { sessionIdOf, useStripe } from "./support.ts";

// The billing and files pages' loaders and form actions (no JavaScript needed: plain posts).
let fake: StripeFake;
let user: TestUser;

beforeAll(async () => {
  fake = useStripe();
  user = await newUser();
});

async function page(
  module: { loader?: unknown; action?: unknown },
  path: string,
  form?: Record<string, string>,
): Promise<Response> {
  const request = new Request(`http://localhost${path}`, {
    method: form ? "POST" : "GET",
    headers: {
      cookie: user.cookie,
      ...(form ? { "content-type": "application/x-www-form-urlencoded" } : {}),
    },
    ...(form ? { body: new URLSearchParams(form).toString() } : {}),
  });
  const fn = (form ? module.action : module.loader) as (args: {
    request: Request;
    params: object;
    context: object;
  }) => Promise<unknown>;
  try {
    const result = await fn({ request, params: {}, context: {} });
    return result instanceof Response ? result : Response.json(result);
  } catch (thrown) {
    if (thrown instanceof Response) return thrown;
    throw thrown;
  }
}

const dataOf = async (res: Response) => {
  // Remix `data()` results are plain objects with `data`/`init` in tests.
  const body = (await res.json()) as Record<string, unknown>;
  return (body.data ?? body) as Record<string, unknown>;
};

describe("pricing page", () => {
  it("lists the four plans, six add-ons, the suite and three packs", async () => {
    const data = (pricingPage.loader as () => ReturnType<typeof pricingPage.loader>)();
    expect(data.plans.map((p) => [p.id, p.pricePence])).toEqual([
      ["solo", 2900],
      ["collective", 6900],
      ["label", 14900],
      ["network", 49900],
    ]);
    expect(data.addOns).toHaveLength(6);
    expect(data.suite.pricePence).toBe(499900);
    expect(data.packs.map((p) => [p.id, p.credits, p.price])).toEqual([
      ["50", 5, "price_credits_50"],
      ["200", 15, "price_credits_200"],
      ["500", 30, "price_credits_500"],
    ]);
  });
});

describe("billing page", () => {
  it("signed out: redirected to sign in", async () => {
    const res = await billingPage
      .loader({ request: new Request("http://localhost/billing"), params: {}, context: {} })
      .catch((r: unknown) => r as Response);
    expect((res as Response).status).toBe(302);
  });

  it("subscribing without a plan goes to Checkout; with one it switches in place", async () => {
    const first = await page(billingPage, "/billing", { intent: "plan", plan: "solo" });
    expect(first.status).toBe(303);
    const session = fake.completeSession(sessionIdOf(first.headers.get("location")!));
    await refreshSubscriptionFromStripe(String(session.subscription), "test");

    const switched = await page(billingPage, "/billing", { intent: "plan", plan: "label" });
    expect(switched.status).toBe(200);
    expect((await dataOf(switched)).value).toMatchObject({ ok: expect.stringMatching(/label/) });
    expect(fake.state.sessions.size).toBe(1);
    const [row] = await db()<{ plan: string }[]>`select plan from users where id = ${user.id}`;
    expect(row!.plan).toBe("label");
    const ledger = await db()`select from_status, to_status, detail from billing_ledger
      where user_id = ${user.id} and kind = 'subscription' order by id`;
    expect(ledger).toHaveLength(2);
    expect(ledger[1]!.detail).toMatch(/solo -> label/);
  });

  it("says which plans the user's agents would exceed (a downgrade stops nothing)", async () => {
    // The previous test left the user on `label` (10 threads): four agents fit.
    for (const name of ["a", "b", "c", "d"]) {
      await createAgentRecord(user.id, { name, model: "openai/gpt-4o-mini" });
    }
    const data = await dataOf(await page(billingPage, "/billing"));
    expect(data.agentCount).toBe(4);
    const warnings = Object.fromEntries(
      (data.plans as { id: string; warning: string | null }[]).map((p) => [p.id, p.warning]),
    );
    expect(warnings.solo).toMatch(/You run 4 agents; the solo plan allows 1/);
    expect(warnings.collective).toMatch(/allows 3/);
    expect(warnings.label).toBeNull();
    expect(warnings.network).toBeNull();
  });

  it("add-ons, the suite and credit packs go to Checkout; the portal link works", async () => {
    const forms: Record<string, string>[] = [
      { intent: "addon", addon: "audit-logs" },
      { intent: "suite" },
      { intent: "credits", pack: "200" },
    ];
    for (const form of forms) {
      const res = await page(billingPage, "/billing", form);
      expect(res.status).toBe(303);
      expect(res.headers.get("location")).toMatch(/^https:\/\/checkout\.stripe\.com\//);
    }
    const portal = await page(billingPage, "/billing", { intent: "portal" });
    expect(portal.status).toBe(303);
    expect(portal.headers.get("location")).toMatch(/^https:\/\/billing\.stripe\.com\//);
  });

  it("an add-on without a configured price answers the form with an error", async () => {
    const price = process.env.STRIPE_PRICE_ADDON_AUDIT_LOGS;
    delete process.env.STRIPE_PRICE_ADDON_AUDIT_LOGS;
    resetEnvCache();
    try {
      const res = await page(billingPage, "/billing", { intent: "addon", addon: "audit-logs" });
      expect((await dataOf(res)).error).toMatch(/No Stripe price/);
    } finally {
      process.env.STRIPE_PRICE_ADDON_AUDIT_LOGS = price;
      resetEnvCache();
    }
  });

  it("an add-on with nothing behind it is not sold: the form says to request it", async () => {
    const res = await page(billingPage, "/billing", { intent: "addon", addon: "slack" });
    expect((await dataOf(res)).error).toMatch(/not sold by checkout: request it/);
  });

  it("the loader shows plan, subscriptions, credits and storage", async () => {
    const data = await dataOf(await page(billingPage, "/billing"));
    expect(data.summary).toMatchObject({
      plan: "label",
      status: "active",
      storage: { limitGb: 5 },
    });
  });
});

describe("files page", () => {
  it("shows storage used and limit; the upgrade form goes to Checkout", async () => {
    const data = await dataOf(await page(filesPage, "/files"));
    expect(data).toMatchObject({ usedGb: 0, limitGb: 5, upgradeGb: 50 });
    const res = await page(filesPage, "/files", {});
    expect(res.status).toBe(303);
    const session = fake.state.sessions.get(sessionIdOf(res.headers.get("location")!))!;
    expect(session.metadata).toMatchObject({ kind: "storage" });
  });
});

it("createCheckout refuses an unknown catalog item with 400", async () => {
  await expect(
    createCheckout({ id: user.id, email: user.email, name: "x" }, "addon", "nope"),
  ).rejects.toMatchObject({ status: 400 });
});
