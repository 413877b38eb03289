import { beforeAll, describe, expect, it } from "vitest";
import * as provisionRoute from "../../app/routes/api.agents.provision.ts";
import * as payCheckout from "../../app/routes/api.pay.checkout.ts";
import * as webhook from "../../app/routes/api.webhooks.pay.ts";
import { processPaymentEvent } from "../../app/server/billing/webhooks.server.ts";
import { as, newUser } from "../accounts/helpers.ts";
import { call } from "../helpers/api.ts";
import { type StripeFake, signedEvent } from "../msw/handlers/stripe.ts";
import { sessionIdOf, useStripe } from "./support.ts";

// Provisioning is gated by the subscription as Stripe reports it, end to end: checkout →
// signed webhook → the stored event applied (the job's handler, run here in-process) →
// POST /api/agents/provision succeeds; the subscription deleted → the next provision is 402.

let fake: StripeFake;
beforeAll(() => {
  fake = useStripe();
});

async function deliver(type: string, object: Record<string, unknown>) {
  const { payload, header } = signedEvent(type, object);
  const res = await call(webhook, "/api/webhooks/pay", {
    method: "POST",
    rawBody: payload,
    headers: { "stripe-signature": header, "content-type": "application/json" },
  });
  expect(res.status).toBe(200);
  await processPaymentEvent(res.json.id);
}

describe("provisioning follows the subscription", () => {
  it("402 before checkout, 201 after it, 402 again once the subscription is deleted", async () => {
    const user = await newUser();
    const provision = (name: string) =>
      as(user, provisionRoute, "/api/agents/provision", {
        method: "POST",
        body: { name, model: "custom" },
      });

    const before = await provision("first");
    expect(before.status).toBe(402);
    expect(before.json.error).toMatch(/subscription/i);

    const checkout = await as(user, payCheckout, "/api/pay/checkout?plan=collective");
    expect(checkout.status).toBe(303);
    const session = fake.completeSession(sessionIdOf(checkout.headers.get("location")!));
    await deliver("checkout.session.completed", session);

    const ok = await provision("first");
    expect(ok.status).toBe(201);
    expect(ok.json).toMatchObject({ success: true, agent: { name: "first", model: "custom" } });

    const sub = fake.state.subscriptions.get(String(session.subscription))!;
    fake.updateSubscription(String(sub.id), { status: "canceled", canceled_at: 1_800_000_000 });
    await deliver("customer.subscription.deleted", sub);

    const after = await provision("second");
    expect(after.status).toBe(402);
    expect(after.json.error).toMatch(/subscription/i);
  });
});
