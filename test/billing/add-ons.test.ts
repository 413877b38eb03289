import { beforeAll, describe, expect, it } from "vitest";
import * as billingApi from "../../app/routes/api.billing.ts";
import * as billingPage from "../../app/routes/billing.tsx";
import {
  auditRetentionDays,
  hasAddon,
  listServiceRequests,
  requestAddOn,
  setServiceRequestStatus,
} from "../../app/server/billing/add-ons.server.ts";
import { addOns } from "../../app/server/billing/catalog.server.ts";
import { createCheckout } from "../../app/server/billing/checkout.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { as, newUser, type TestUser } from "../accounts/helpers.ts";
import { subscribe } from "../agents/support.ts";
import type { StripeFake } from "../msw/handlers/stripe.ts";
import { useStripe } from "./support.ts";

// Sell only what exists (decision 0101): Audit Logs is bought and gives a year of audit
// retention (also through the suite); the add-ons with nothing automatic behind them are service
// requests that operators see, and checkout never takes money for them.

let fake: StripeFake;
let user: TestUser;
const REQUESTED = ["slack", "salesforce", "api-access", "custom-integration", "account-manager"];

beforeAll(async () => {
  fake = useStripe();
  // Prices configured for every add-on: even then the request-only ones are not sold.
  for (const a of addOns) process.env[a.priceVar] ??= `price_${a.id}`;
  resetEnvCache();
  user = await newUser();
});

describe("the catalog", () => {
  it("says what each add-on gives; only Audit Logs is bought", () => {
    expect(addOns.filter((a) => a.fulfilment === "checkout").map((a) => a.id)).toEqual([
      "audit-logs",
    ]);
    expect(addOns.filter((a) => a.fulfilment === "request").map((a) => a.id)).toEqual(REQUESTED);
    for (const a of addOns) expect(a.gives.length).toBeGreaterThan(20);
  });
});

describe("request-only add-ons", () => {
  it("checkout refuses them (409) and opens no Stripe session", async () => {
    const before = fake.state.sessions.size;
    for (const id of REQUESTED) {
      await expect(
        createCheckout({ ...user, name: user.email }, "addon", id),
      ).rejects.toMatchObject({
        status: 409,
        message: expect.stringMatching(/request it on \/billing/),
      });
    }
    expect(fake.state.sessions.size).toBe(before);
  });

  it("a request is stored once while open, seen by operators, and can be asked again once done", async () => {
    const first = await requestAddOn(user.id, "slack", "Our workspace is acme");
    expect(first).toMatchObject({
      created: true,
      request: { userId: user.id, addon: "slack", status: "open", note: "Our workspace is acme" },
    });
    const again = await requestAddOn(user.id, "slack");
    expect(again).toMatchObject({ created: false, request: { id: first.request.id } });
    const open = await listServiceRequests();
    expect(open.filter((r) => r.userId === user.id)).toHaveLength(1);
    await setServiceRequestStatus(first.request.id, "done");
    expect((await listServiceRequests()).some((r) => r.id === first.request.id)).toBe(false);
    expect((await requestAddOn(user.id, "slack")).created).toBe(true);
    await expect(setServiceRequestStatus("srq_nobody", "done")).rejects.toMatchObject({
      status: 404,
    });
  });

  it("refuses an unknown add-on (400) and a bought one (409)", async () => {
    await expect(requestAddOn(user.id, "teleport")).rejects.toMatchObject({ status: 400 });
    await expect(requestAddOn(user.id, "audit-logs")).rejects.toMatchObject({ status: 409 });
  });

  it("the billing page's Request button stores the request; GET /api/billing lists it", async () => {
    const someone = await newUser();
    const request = new Request("http://localhost/billing", {
      method: "POST",
      headers: {
        cookie: someone.cookie,
        origin: "http://localhost",
        "content-type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ intent: "request-addon", addon: "account-manager" }),
    });
    const result = await billingPage.action({ request, params: {}, context: {} });
    expect(result.data.value?.ok).toMatch(/Request sent/);
    const rows =
      await db()`select addon, status from service_requests where user_id = ${someone.id}`;
    expect(rows).toEqual([{ addon: "account-manager", status: "open" }]);
    const summary = (await as(someone, billingApi, "/api/billing")).json;
    expect(summary.serviceRequests).toEqual([
      expect.objectContaining({ addon: "account-manager", status: "open" }),
    ]);
  });
});

describe("Audit Logs", () => {
  it("gives 365 days of audit retention through its subscription or the suite, else 90", async () => {
    const plain = await newUser();
    expect(await hasAddon(plain.id, "audit-logs")).toBe(false);
    expect(await auditRetentionDays(plain.id)).toBe(90);

    const buyer = await newUser();
    await subscribe(buyer.id, "audit-logs", "addon");
    expect(await hasAddon(buyer.id, "audit-logs")).toBe(true);
    expect(await auditRetentionDays(buyer.id)).toBe(365);

    const suite = await newUser();
    await subscribe(suite.id, "suite", "suite");
    expect(await auditRetentionDays(suite.id)).toBe(365);

    const lapsed = await newUser();
    await subscribe(lapsed.id, "audit-logs", "addon");
    await db()`update subscriptions set status = 'canceled' where user_id = ${lapsed.id}`;
    expect(await auditRetentionDays(lapsed.id)).toBe(90);
  });

  it("is still sold by checkout", async () => {
    const { url } = await createCheckout({ ...user, name: user.email }, "addon", "audit-logs");
    expect(url).toMatch(/^https:\/\/checkout\.stripe\.com\//);
  });
});
