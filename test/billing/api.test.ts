import { beforeAll, describe, expect, it } from "vitest";
import * as signout from "../../app/routes/api.auth.signout.ts";
import * as token from "../../app/routes/api.billing.token.ts";
import * as billing from "../../app/routes/api.billing.ts";
import * as legacy from "../../app/routes/api.checkout.ts";
import * as credits from "../../app/routes/api.credits.ts";
import * as payCheckout from "../../app/routes/api.pay.checkout.ts";
import * as payCredits from "../../app/routes/api.pay.credits.ts";
import * as storage from "../../app/routes/api.pay.storage-upgrade.ts";
import { userKeys } from "../../app/server/ai/byok.server.ts";
import { refreshSubscriptionFromStripe } from "../../app/server/billing/subscriptions.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { as, newUser, type TestUser } from "../accounts/helpers.ts";
import { call } from "../helpers/api.ts";
import { createOpenAiFake, OPENAI_BASE } from "../msw/handlers/openai.ts";
import type { StripeFake } from "../msw/handlers/stripe.ts";
import { mswServer } from "../msw/server.ts";
import { sessionIdOf, useStripe, withoutStripe } from "./support.ts";

let fake: StripeFake;
let alice: TestUser;

beforeAll(async () => {
  fake = useStripe();
  alice = await newUser({ name: "Alice" });
});

describe("GET /api/pay/checkout", () => {
  it("303s to a subscription Checkout session for the user's one customer", async () => {
    const first = await as(alice, payCheckout, "/api/pay/checkout?plan=solo");
    expect(first.status).toBe(303);
    const url = first.headers.get("location")!;
    expect(url).toMatch(/^https:\/\/checkout\.stripe\.com\/c\/pay\/cs_/);
    const session = fake.state.sessions.get(sessionIdOf(url))!;
    expect(session).toMatchObject({
      mode: "subscription",
      client_reference_id: alice.id,
      metadata: { userId: alice.id, kind: "plan", item: "solo" },
      line_items_for_test: [{ price: "price_solo", quantity: "1" }],
    });
    const second = await as(alice, payCheckout, "/api/pay/checkout?plan=network");
    const again = fake.state.sessions.get(sessionIdOf(second.headers.get("location")!))!;
    expect(again.customer).toBe(session.customer);
    expect(fake.state.customers.size).toBe(1);
  });

  it("answers 400 for a plan outside the four", async () => {
    const res = await as(alice, payCheckout, "/api/pay/checkout?plan=starter");
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/plan/);
  });

  it("sends a signed-out browser to sign in and back", async () => {
    const res = await call(payCheckout, "/api/pay/checkout?plan=label");
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe(
      `/signin?redirectTo=${encodeURIComponent("/api/pay/checkout?plan=label")}`,
    );
  });

  it("answers 503 {error} when Stripe is not configured", async () => {
    const res = await withoutStripe(() => as(alice, payCheckout, "/api/pay/checkout?plan=solo"));
    expect(res.status).toBe(503);
    expect(res.json.error).toMatch(/not configured/);
  });
});

/** Completes a checkout in the fake and stores the subscription the way the webhook job does. */
async function completeAndSync(url: string) {
  const session = fake.completeSession(sessionIdOf(url));
  const subId = String(session.subscription);
  await refreshSubscriptionFromStripe(subId, `test:${subId}`);
  return subId;
}

describe("no second subscription of a kind the user already has", () => {
  it("GET /api/pay/checkout sends a subscribed user to /billing; none once canceled", async () => {
    const bob = await newUser({ name: "Bob" });
    const first = await as(bob, payCheckout, "/api/pay/checkout?plan=solo");
    const subId = await completeAndSync(first.headers.get("location")!);
    const sessions = fake.state.sessions.size;
    for (const status of ["active", "past_due", "incomplete"]) {
      fake.updateSubscription(subId, { status });
      await refreshSubscriptionFromStripe(subId, `test:${status}`);
      const again = await as(bob, payCheckout, "/api/pay/checkout?plan=label");
      expect(again.status).toBe(303);
      expect(again.headers.get("location")).toBe("/billing?checkout=already-subscribed");
    }
    expect(fake.state.sessions.size).toBe(sessions);
    fake.updateSubscription(subId, { status: "canceled", canceled_at: 1_800_000_000 });
    await refreshSubscriptionFromStripe(subId, "test:canceled");
    const after = await as(bob, payCheckout, "/api/pay/checkout?plan=label");
    expect(after.headers.get("location")).toMatch(/^https:\/\/checkout\.stripe\.com\//);
  });

  it("POST /api/billing create-checkout answers 409 {error} naming /billing", async () => {
    const carol = await newUser({ name: "Carol" });
    const first = await as(carol, billing, "/api/billing", {
      method: "POST",
      body: { action: "create-checkout", plan: "starter" },
    });
    expect(first.status).toBe(200);
    await completeAndSync(first.json.url);
    const sessions = fake.state.sessions.size;
    const second = await as(carol, billing, "/api/billing", {
      method: "POST",
      body: { action: "create-checkout", plan: "pro" },
    });
    expect(second.status).toBe(409);
    expect(Object.keys(second.json)).toEqual(["error"]);
    expect(second.json.error).toMatch(/already have a billing-API plan subscription.*\/billing/);
    expect(fake.state.sessions.size).toBe(sessions);
    // Another kind (a monthly plan) is still open to the same user.
    const plan = await as(carol, payCheckout, "/api/pay/checkout?plan=solo");
    expect(plan.headers.get("location")).toMatch(/^https:\/\/checkout\.stripe\.com\//);
  });
});

describe("GET /api/pay/credits", () => {
  it("starts a payment-mode checkout for an allowed credit price", async () => {
    const res = await as(alice, payCredits, "/api/pay/credits?price=price_credits_200");
    expect(res.status).toBe(303);
    const session = fake.state.sessions.get(sessionIdOf(res.headers.get("location")!))!;
    expect(session).toMatchObject({ mode: "payment", metadata: { kind: "credits", item: "200" } });
  });

  it("refuses any other price with 400", async () => {
    for (const price of ["price_solo", "price_anything"]) {
      const res = await as(alice, payCredits, `/api/pay/credits?price=${price}`);
      expect(res.status).toBe(400);
    }
  });
});

describe("POST /api/pay/storage-upgrade", () => {
  it("returns {url}; success and cancel land on the files dashboard", async () => {
    const res = await as(alice, storage, "/api/pay/storage-upgrade", { method: "POST" });
    expect(res.status).toBe(200);
    const session = fake.state.sessions.get(sessionIdOf(res.json.url))!;
    expect(session.mode).toBe("payment");
    expect(String(session.success_url)).toMatch(/\/files\?upgrade=success/);
    expect(String(session.cancel_url)).toMatch(/\/files\?error=/);
  });

  it("401 signed out, 500 {error} without Stripe", async () => {
    expect((await call(storage, "/api/pay/storage-upgrade", { method: "POST" })).status).toBe(401);
    const res = await withoutStripe(() =>
      as(alice, storage, "/api/pay/storage-upgrade", { method: "POST" }),
    );
    expect(res.status).toBe(500);
    expect(res.json.error).toMatch(/not configured/);
  });
});

it("GET /api/checkout is gone (410) and names the new endpoint", async () => {
  const res = await call(legacy, "/api/checkout");
  expect(res.status).toBe(410);
  expect(res.json.error).toContain("/api/pay/checkout?plan=");
});

describe("the billing API", () => {
  it("GET /api/billing shows plan, status, period, credits and usage", async () => {
    const bob = await newUser();
    const res = await as(bob, billing, "/api/billing");
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      plan: "free",
      status: "none",
      active: false,
      currentPeriodEnd: null,
      credits: 0,
      storage: { limitGb: 5 },
      usage: { today: { calls: 0 } },
    });
    expect((await call(billing, "/api/billing")).status).toBe(401);
  });

  it("accepts the session token as a Bearer JWT, until the session ends", async () => {
    const carol = await newUser();
    const minted = await as(carol, token, "/api/billing/token");
    expect(minted.status).toBe(200);
    const jwt = minted.json.token as string;
    expect(jwt.split(".")).toHaveLength(3);
    const bearer = { headers: { authorization: `Bearer ${jwt}` } };
    const ok = await call(billing, "/api/billing", bearer);
    expect(ok.status).toBe(200);
    expect(ok.json.plan).toBe("free");
    const tampered = `${jwt.slice(0, -3)}${jwt.endsWith("AAA") ? "BBB" : "AAA"}`;
    expect(
      (await call(billing, "/api/billing", { headers: { authorization: `Bearer ${tampered}` } }))
        .status,
    ).toBe(401);
    await as(carol, signout, "/api/auth/signout", { method: "POST" });
    expect((await call(billing, "/api/billing", bearer)).status).toBe(401);
  });

  it("create-checkout for a billing-API plan answers {url}; a bad plan 400", async () => {
    const res = await as(alice, billing, "/api/billing", {
      method: "POST",
      body: { action: "create-checkout", plan: "pro" },
    });
    expect(res.status).toBe(200);
    const session = fake.state.sessions.get(sessionIdOf(res.json.url))!;
    expect(session.metadata).toMatchObject({ kind: "api", item: "pro" });
    const bad = await as(alice, billing, "/api/billing", {
      method: "POST",
      body: { action: "create-checkout", plan: "solo" },
    });
    expect(bad.status).toBe(400);
  });

  it("buy-credits answers {url} for packs 50, 200, 500 only", async () => {
    const res = await as(alice, billing, "/api/billing", {
      method: "POST",
      body: { action: "buy-credits", pack: "500" },
    });
    expect(res.status).toBe(200);
    expect(fake.state.sessions.get(sessionIdOf(res.json.url))!.metadata).toMatchObject({
      kind: "credits",
      item: "500",
    });
    const bad = await as(alice, billing, "/api/billing", {
      method: "POST",
      body: { action: "buy-credits", pack: "100" },
    });
    expect(bad.status).toBe(400);
  });

  it("an unknown action is 400", async () => {
    const res = await as(alice, billing, "/api/billing", {
      method: "POST",
      body: { action: "mine-bitcoin" },
    });
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/action/);
  });

  it("enable-byok checks the key with the provider, seals it; disable-byok removes it", async () => {
    const openai = createOpenAiFake(OPENAI_BASE, { apiKey: "sk-user-good-key-123" });
    mswServer.use(...openai.handlers);
    const dave = await newUser();
    const rejected = await as(dave, billing, "/api/billing", {
      method: "POST",
      body: { action: "enable-byok", provider: "openai", apiKey: "sk-user-wrong-key-000" },
    });
    expect(rejected.status).toBe(400);
    expect((await userKeys(dave.id)).size).toBe(0);

    const enabled = await as(dave, billing, "/api/billing", {
      method: "POST",
      body: { action: "enable-byok", provider: "openai", apiKey: "sk-user-good-key-123" },
    });
    expect(enabled.status).toBe(200);
    expect(enabled.json).toMatchObject({ success: true, byok: true, provider: "openai" });
    expect((await userKeys(dave.id)).get("openai")).toBe("sk-user-good-key-123");
    const [row] = await db()<{ sealed_key: string }[]>`
      select sealed_key from ai_user_keys where user_id = ${dave.id}`;
    expect(row!.sealed_key).not.toContain("sk-user-good-key-123");

    const disabled = await as(dave, billing, "/api/billing", {
      method: "POST",
      body: { action: "disable-byok" },
    });
    expect(disabled.json).toMatchObject({ success: true, byok: false, removed: 1 });
    expect((await userKeys(dave.id)).size).toBe(0);
  });

  it("get-usage returns daily usage from the AI meter", async () => {
    const res = await as(alice, billing, "/api/billing", {
      method: "POST",
      body: { action: "get-usage" },
    });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ success: true, usage: { days: [], byModel: [] } });
  });

  it("GET /api/credits: balance and recent entries", async () => {
    const res = await as(alice, credits, "/api/credits");
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ balance: 0, entries: [] });
  });
});
