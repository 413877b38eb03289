import { beforeAll, describe, expect, it } from "vitest";
import * as contactRoute from "../../app/routes/api.organizations.$id.billing-contact.ts";
import * as invitationsRoute from "../../app/routes/api.organizations.$id.invitations.ts";
import * as seatsRoute from "../../app/routes/api.organizations.$id.seats.ts";
import * as payCheckout from "../../app/routes/api.pay.checkout.ts";
import * as webhook from "../../app/routes/api.webhooks.pay.ts";
import * as organisationPage from "../../app/routes/organizations.$id.tsx";
import { processPaymentEvent } from "../../app/server/billing/webhooks.server.ts";
import {
  addMember,
  createOrganisation,
} from "../../app/server/organisations/organisations.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { sessionIdOf, useStripe } from "../billing/support.ts";
import { call } from "../helpers/api.ts";
import { page } from "../helpers/pages.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";
import { type StripeFake, signedEvent } from "../msw/handlers/stripe.ts";

// Seats billed (issue 48, decision 0215): an organisation checks out its plan with extra seats
// (its customer carrying its billing contact's email), the webhook's re-read from the processor
// sets its paid seats, invitations past them are 402, more seats are a prorated quantity change
// and fewer stay until the paid period ends. Stripe is the msw fake; webhooks are processed by
// the job's own function.

let fake: StripeFake;
const OWNER = "usr_sb_owner";
const BILLING = "usr_sb_billing";
const MEMBER = "usr_sb_member";
const SEAT_PRICE = "price_seat";
let org: string;
type Obj = Record<string, unknown>;

const as = async (userId: string, organisationId?: string) => ({
  cookie: await sessionCookieFor(userId),
  ...(organisationId ? { "x-organization": organisationId } : {}),
});

/** Delivers a signed event and runs its job (as the worker would). */
async function deliver(type: string, object: Obj) {
  const { payload, header } = signedEvent(type, object);
  const res = await call(webhook, "/api/webhooks/pay", {
    method: "POST",
    rawBody: payload,
    headers: { "stripe-signature": header, "content-type": "application/json" },
  });
  expect(res.status).toBe(200);
  return processPaymentEvent(res.json.id);
}

const seats = async () =>
  (
    await call(seatsRoute, `/api/organizations/${org}/seats`, {
      params: { id: org },
      headers: await as(OWNER),
    })
  ).json.seats;

const buySeats = async (who: string, n: number) =>
  call(seatsRoute, `/api/organizations/${org}/seats`, {
    method: "PUT",
    params: { id: org },
    body: { seats: n },
    headers: await as(who),
  });

const invite = async (email: string) =>
  call(invitationsRoute, `/api/organizations/${org}/invitations`, {
    method: "POST",
    params: { id: org },
    body: { email, role: "member" },
    headers: await as(OWNER),
  });

const subscriptionUpdates = () =>
  fake.state.calls.filter((c) => c.method === "POST" && c.path.startsWith("/v1/subscriptions/"));

beforeAll(async () => {
  fake = useStripe();
  process.env.STRIPE_PRICE_SEAT = SEAT_PRICE;
  resetEnvCache();
  for (const id of [OWNER, BILLING, MEMBER]) await ensureUser(id);
  ({
    organisation: { id: org },
  } = await createOrganisation(OWNER, "Seat Co"));
  await addMember(org, OWNER, { email: `${BILLING}@example.com`, role: "billing" });
});

describe("seats bought through the payment processor", () => {
  let subscriptionId: string;

  it("checks the organisation out with extra seats, its owner as billing contact", async () => {
    const refused = await call(payCheckout, "/api/pay/checkout?plan=collective&seats=1", {
      headers: await as(MEMBER, org),
    });
    expect(refused.status).toBe(404); // not yet a member
    const res = await call(payCheckout, "/api/pay/checkout?plan=collective&seats=1", {
      headers: await as(BILLING, org),
    });
    expect(res.status).toBe(303);
    const sessionId = sessionIdOf(res.headers.get("location")!);
    const session = fake.state.sessions.get(sessionId)!;
    expect(session.line_items_for_test).toEqual([
      { price: "price_collective", quantity: "1" },
      { price: SEAT_PRICE, quantity: "1" },
    ]);
    expect(session.metadata).toMatchObject({ userId: org, kind: "plan", item: "collective" });
    expect(session.success_url).toMatch(new RegExp(`/organizations/${org}\\?checkout=success$`));
    const customer = fake.state.customers.get(String(session.customer))!;
    expect(customer).toMatchObject({ email: `${OWNER}@example.com`, name: "Seat Co" });

    // Before the processor confirms anything, the organisation has the free single seat.
    expect(await seats()).toMatchObject({ limit: 1, paid: 0 });
    const completed = fake.completeSession(sessionId);
    subscriptionId = String(completed.subscription);
    expect(await deliver("checkout.session.completed", completed)).toEqual({
      effect: "subscription synced",
    });
    // collective: 1 + 1 gateway seat; plus the seat bought.
    expect(await seats()).toMatchObject({ plan: "collective", fromPlan: 2, paid: 1, limit: 3 });
  });

  it("refuses invitations past the paid seats with 402 naming them", async () => {
    await addMember(org, OWNER, { email: `${MEMBER}@example.com`, role: "member" });
    expect((await invite("sb-one@example.com")).status).toBe(201);
    const over = await invite("sb-two@example.com");
    expect(over.status).toBe(402);
    expect(over.json.error).toContain("plus 1 bought");
    expect(over.json.error).toContain("buy more seats");
  });

  it("adds seats as a prorated quantity change, once per change", async () => {
    expect((await buySeats(MEMBER, 3)).status).toBe(403);
    const before = subscriptionUpdates().length;
    const res = await buySeats(BILLING, 3);
    expect(res.status).toBe(200);
    expect(res.json.seats).toMatchObject({ paid: 3, limit: 5 });
    const updates = subscriptionUpdates().slice(before);
    expect(updates).toHaveLength(1);
    expect(updates[0]!.body).toMatchObject({
      items: [{ quantity: "3" }],
      proration_behavior: "create_prorations",
    });
    // Asking for what it has changes nothing at the processor.
    expect((await buySeats(BILLING, 3)).status).toBe(200);
    expect(subscriptionUpdates().length).toBe(before + 1);
    expect((await invite("sb-two@example.com")).status).toBe(201);
  });

  it("keeps fewer seats paid for until the period ends, and follows the processor's webhook", async () => {
    const res = await buySeats(BILLING, 1);
    expect(res.status).toBe(200);
    const update = subscriptionUpdates().at(-1)!;
    expect(update.body).toMatchObject({ items: [{ quantity: "1" }], proration_behavior: "none" });
    // Stripe bills 1 from the next invoice; the 3 paid for stay until the period's end.
    expect(res.json.seats).toMatchObject({ paid: 3, limit: 5 });
    const [row] = await db()<{ seat_quantity: number; seats_kept: number; until: Date | null }[]>`
      select seat_quantity, seats_kept, seats_kept_until as until from subscriptions
      where id = ${subscriptionId}`;
    expect(row).toMatchObject({ seat_quantity: 1, seats_kept: 3 });
    expect(row?.until?.getTime()).toBeGreaterThan(Date.now());
    // The period ends.
    await db()`update subscriptions set seats_kept_until = now() - interval '1 second'
      where id = ${subscriptionId}`;
    expect(await seats()).toMatchObject({ paid: 1, limit: 3 });

    // A change made at the processor (its dashboard) arrives by webhook and is re-read: the
    // payload's own figures are not trusted.
    const sub = fake.state.subscriptions.get(subscriptionId)!;
    const items = (sub.items as { data: Array<{ price: { id: string }; quantity: number }> }).data;
    items.find((i) => i.price.id === SEAT_PRICE)!.quantity = 4;
    const forged = structuredClone(sub);
    (forged.items as { data: Array<{ quantity: number }> }).data[1]!.quantity = 50;
    await deliver("customer.subscription.updated", forged);
    expect(await seats()).toMatchObject({ paid: 4, limit: 6 });
  });

  it("moves the processor's customer to a chosen billing contact", async () => {
    const res = await call(contactRoute, `/api/organizations/${org}/billing-contact`, {
      method: "PUT",
      params: { id: org },
      body: { userId: BILLING },
      headers: await as(OWNER),
    });
    expect(res.status).toBe(200);
    expect(res.json.contact).toMatchObject({ userId: BILLING, email: `${BILLING}@example.com` });
    const [customer] = [...fake.state.customers.values()];
    expect(customer?.email).toBe(`${BILLING}@example.com`);
    const notMember = await call(contactRoute, `/api/organizations/${org}/billing-contact`, {
      method: "PUT",
      params: { id: org },
      body: { userId: "usr_sb_nobody" },
      headers: await as(OWNER),
    });
    expect(notMember.status).toBe(404);
  });

  it("starts an organisation's checkout and changes its seats from the organisation page", async () => {
    const {
      organisation: { id: other },
    } = await createOrganisation(OWNER, "Page Seat Co");
    const shown = await page(
      organisationPage,
      `/organizations/${other}`,
      await as(OWNER),
      undefined,
      {
        id: other,
      },
    );
    expect((shown.body as { billing: { subscribed: boolean } }).billing.subscribed).toBe(false);
    const res = await page(
      organisationPage,
      `/organizations/${other}`,
      await as(OWNER),
      { intent: "checkout", plan: "label", seats: "2" },
      { id: other },
    );
    expect(res.status).toBe(303);
    const session = fake.state.sessions.get(sessionIdOf(res.location!))!;
    expect(session.line_items_for_test).toEqual([
      { price: "price_label", quantity: "1" },
      { price: SEAT_PRICE, quantity: "2" },
    ]);
    // Seats change only on a live plan subscription.
    const early = await page(
      organisationPage,
      `/organizations/${other}`,
      await as(OWNER),
      { intent: "seats", seats: "3" },
      { id: other },
    );
    expect(JSON.stringify(early.body)).toContain("No live plan subscription");
  });
});
