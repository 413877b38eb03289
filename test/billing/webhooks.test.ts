import { readdir } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as billing from "../../app/routes/api.billing.ts";
import * as payCheckout from "../../app/routes/api.pay.checkout.ts";
import * as payCredits from "../../app/routes/api.pay.credits.ts";
import * as storage from "../../app/routes/api.pay.storage-upgrade.ts";
import * as webhook from "../../app/routes/api.webhooks.pay.ts";
import { creditBalance } from "../../app/server/accounts/credits.server.ts";
import {
  hasActiveSubscription,
  refreshSubscriptionFromStripe,
  requireActiveSubscription,
  storageLimitGb,
} from "../../app/server/billing/subscriptions.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { getBoss } from "../../app/server/platform/jobs.server.ts";
import { stopUnpaidInstance } from "../../worker/jobs/stop-unpaid-instance.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { as, newUser, type TestUser } from "../accounts/helpers.ts";
import { call } from "../helpers/api.ts";
import { type StripeFake, signedEvent } from "../msw/handlers/stripe.ts";
import { sessionIdOf, useStripe } from "./support.ts";

// Webhook → pg-boss → worker → Stripe re-read → database, end to end.

let fake: StripeFake;

beforeAll(async () => {
  fake = useStripe();
  await startWorker();
});

afterAll(async () => {
  await stopWorker(5_000);
});

type Obj = Record<string, unknown>;

function deliver(type: string, object: Obj, opts: { id?: string; secret?: string } = {}) {
  const { payload, header } = signedEvent(type, object, opts);
  return call(webhook, "/api/webhooks/pay", {
    method: "POST",
    rawBody: payload,
    headers: { "stripe-signature": header, "content-type": "application/json" },
  });
}

const processed = async (eventId: string) => {
  const [row] = await db()<{ processed_at: Date | null }[]>`
    select processed_at from payment_events where id = ${eventId}`;
  return Boolean(row?.processed_at);
};

async function subscriptionOf(userId: string) {
  const [row] = await db()<
    { id: string; item: string; status: string; current_period_end: Date }[]
  >`
    select id, item, status, current_period_end from subscriptions where user_id = ${userId}
    order by created_at desc limit 1`;
  return row;
}

const planOf = async (userId: string) =>
  (await db()<{ plan: string }[]>`select plan from users where id = ${userId}`)[0]!.plan;

const ledgerRows = async (userId: string, kind = "subscription") =>
  Number(
    (
      await db()<{ n: number }[]>`
        select count(*)::int as n from billing_ledger where user_id = ${userId} and kind = ${kind}`
    )[0]!.n,
  );

/** Checkout for a plan, completed by the customer; returns the Stripe session and subscription. */
async function subscribe(user: TestUser, plan = "solo") {
  const res = await as(user, payCheckout, `/api/pay/checkout?plan=${plan}`);
  const session = fake.completeSession(sessionIdOf(res.headers.get("location")!));
  const sub = fake.state.subscriptions.get(String(session.subscription))!;
  return { session, sub };
}

describe("signature and filtering", () => {
  it("a bad or missing signature is 400 and stores nothing", async () => {
    const user = await newUser();
    const { sub } = await subscribe(user);
    const forged = await deliver("customer.subscription.created", sub, {
      id: "evt_forged_1",
      secret: "whsec_wrong",
    });
    expect(forged.status).toBe(400);
    const { payload } = signedEvent("customer.subscription.created", sub, { id: "evt_forged_2" });
    const unsigned = await call(webhook, "/api/webhooks/pay", { method: "POST", rawBody: payload });
    expect(unsigned.status).toBe(400);
    const rows =
      await db()`select id from payment_events where id in ('evt_forged_1', 'evt_forged_2')`;
    expect(rows).toHaveLength(0);
    expect(await subscriptionOf(user.id)).toBeUndefined();
  });

  it("an event kind outside the six is 200 and ignored", async () => {
    const res = await deliver(
      "customer.created",
      { id: "cus_x", object: "customer" },
      {
        id: "evt_ignored_1",
      },
    );
    expect(res.status).toBe(200);
    expect(res.json.result).toBe("ignored");
    expect(await db()`select id from payment_events where id = 'evt_ignored_1'`).toHaveLength(0);
  });
});

describe("subscriptions follow Stripe", () => {
  it("checkout → webhook → active plan; provisioning allowed; deleted → 402", async () => {
    const user = await newUser();
    expect(await hasActiveSubscription(user.id)).toBe(false);
    await expect(requireActiveSubscription(user.id)).rejects.toMatchObject({ status: 402 });
    const { session, sub } = await subscribe(user, "collective");
    const done = await deliver("checkout.session.completed", session);
    expect(done.status).toBe(200);
    await expect.poll(() => processed(done.json.id)).toBe(true);
    expect(await subscriptionOf(user.id)).toMatchObject({ item: "collective", status: "active" });
    expect(await planOf(user.id)).toBe("collective");
    await expect(requireActiveSubscription(user.id)).resolves.toBeUndefined();

    fake.updateSubscription(String(sub.id), { status: "canceled", canceled_at: 1_800_000_000 });
    const deleted = await deliver("customer.subscription.deleted", sub);
    await expect.poll(() => processed(deleted.json.id)).toBe(true);
    expect(await subscriptionOf(user.id)).toMatchObject({ status: "canceled" });
    expect(await planOf(user.id)).toBe("free");
    await expect(requireActiveSubscription(user.id)).rejects.toMatchObject({ status: 402 });

    // The instance is stopped at the end of the paid period: a job scheduled for then, which
    // checks the subscription again when it runs.
    const boss = await getBoss();
    const [stop] = await boss.findJobs("stop-unpaid-instance", { data: { userId: user.id } });
    expect(stop).toBeDefined();
    const [row] =
      await db()`select current_period_end from subscriptions where user_id = ${user.id}`;
    const periodEnd = (row!.current_period_end as Date).getTime();
    const startAfter = new Date(stop!.startAfter).getTime();
    expect(Math.abs(startAfter - Math.max(periodEnd, Date.now()))).toBeLessThan(60_000);
    expect(await stopUnpaidInstance({ userId: user.id })).toEqual({
      userId: user.id,
      stopped: false,
      reason: "no instance",
    });
    const again = await subscribe(user, "solo");
    const renewed = await deliver("checkout.session.completed", again.session);
    await expect.poll(() => processed(renewed.json.id)).toBe(true);
    expect(await hasActiveSubscription(user.id)).toBe(true);
    expect(await stopUnpaidInstance({ userId: user.id })).toMatchObject({ reason: "subscribed" });
  });

  it("replaying one event 10 times changes state once", async () => {
    const user = await newUser();
    const { sub } = await subscribe(user);
    const eventId = `evt_replay_${user.id}`;
    const results: string[] = [];
    for (let i = 0; i < 10; i++) {
      const res = await deliver("customer.subscription.created", sub, { id: eventId });
      expect(res.status).toBe(200);
      results.push(res.json.result);
    }
    expect(results.filter((r) => r === "queued")).toHaveLength(1);
    expect(results.filter((r) => r === "duplicate")).toHaveLength(9);
    await expect.poll(() => processed(eventId)).toBe(true);
    expect(await ledgerRows(user.id)).toBe(1);
    const [attempts] = await db()<{ attempts: number }[]>`
      select attempts from payment_events where id = ${eventId}`;
    expect(attempts!.attempts).toBe(1);
  });

  it("a stored event never processed and without a job is processed on redelivery, once", async () => {
    const user = await newUser();
    const { sub } = await subscribe(user);
    const eventId = `evt_stuck_${user.id}`;
    // What an event whose job failed for good leaves: the row, unprocessed, and no live job.
    await db()`
      insert into payment_events (id, type, object_id, attempts, last_error)
      values (${eventId}, 'customer.subscription.created', ${String(sub.id)}, 11,
        'Payment processor error: unreachable')`;
    const results = await Promise.all(
      Array.from({ length: 4 }, () =>
        deliver("customer.subscription.created", sub, { id: eventId }),
      ),
    );
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(results.filter((r) => r.json.result === "queued")).toHaveLength(1);
    await expect.poll(() => processed(eventId)).toBe(true);
    expect(await subscriptionOf(user.id)).toMatchObject({ status: "active" });
    expect(await ledgerRows(user.id)).toBe(1);
    // Processed now: a further resend is a no-op.
    const replay = await deliver("customer.subscription.created", sub, { id: eventId });
    expect(replay.json.result).toBe("duplicate");
    const boss = await getBoss();
    expect(await boss.findJobs("process-payment-event", { data: { eventId } })).toHaveLength(1);
    const [row] = await db()<{ attempts: number }[]>`
      select attempts from payment_events where id = ${eventId}`;
    expect(row!.attempts).toBe(12);
  });

  it("updated delivered before created converges on Stripe's state", async () => {
    const user = await newUser();
    const { sub } = await subscribe(user, "solo");
    // Stripe's state moved on (upgraded to label) before any event reached us.
    const created = structuredClone(sub);
    fake.updateSubscription(String(sub.id), { status: "active" });
    (fake.state.subscriptions.get(String(sub.id))!.items as { data: Obj[] }).data[0]!.price = {
      id: "price_label",
      object: "price",
    };
    const updated = await deliver(
      "customer.subscription.updated",
      fake.state.subscriptions.get(String(sub.id))!,
    );
    await expect.poll(() => processed(updated.json.id)).toBe(true);
    const late = await deliver("customer.subscription.created", created);
    await expect.poll(() => processed(late.json.id)).toBe(true);
    expect(await subscriptionOf(user.id)).toMatchObject({ item: "label", status: "active" });
    expect(await planOf(user.id)).toBe("label");
  });

  it("concurrent duplicate deliveries do not double-apply", async () => {
    const user = await newUser();
    const { sub } = await subscribe(user);
    const eventId = `evt_concurrent_${user.id}`;
    const results = await Promise.all(
      Array.from({ length: 8 }, () =>
        deliver("customer.subscription.created", sub, { id: eventId }),
      ),
    );
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(results.filter((r) => r.json.result === "queued")).toHaveLength(1);
    // Different events about the same subscription, at once: one state, one ledger row.
    const others = await Promise.all(
      Array.from({ length: 4 }, () => deliver("customer.subscription.updated", sub)),
    );
    for (const r of others) await expect.poll(() => processed(r.json.id)).toBe(true);
    await expect.poll(() => processed(eventId)).toBe(true);
    expect(await ledgerRows(user.id)).toBe(1);
  });

  it("past_due from a failed payment sends one email; a paid invoice extends the period", async () => {
    const user = await newUser();
    const { sub } = await subscribe(user, "solo");
    const subId = String(sub.id);
    fake.updateSubscription(subId, { status: "past_due" });
    const failed = fake.createInvoice(subId, "open");
    const f1 = await deliver("invoice.payment_failed", failed);
    const f2 = await deliver("invoice.payment_failed", failed);
    await expect.poll(() => processed(f1.json.id)).toBe(true);
    await expect.poll(() => processed(f2.json.id)).toBe(true);
    expect(await subscriptionOf(user.id)).toMatchObject({ status: "past_due" });
    expect(await hasActiveSubscription(user.id)).toBe(false);
    expect(await ledgerRows(user.id, "payment_failed")).toBe(1);
    const mailDir = path.join(process.env.DATA_DIR!, "mail");
    const mailsTo = async () => {
      const files = await readdir(mailDir).catch(() => [] as string[]);
      return files.filter((f) => f.endsWith(".eml")).length;
    };
    await expect.poll(mailsTo).toBe(1);

    const nextEnd = Math.floor(Date.now() / 1000) + 60 * 24 * 60 * 60;
    fake.updateSubscription(subId, { status: "active", periodEnd: nextEnd });
    const paid = await deliver("invoice.payment_succeeded", fake.createInvoice(subId, "paid"));
    await expect.poll(() => processed(paid.json.id)).toBe(true);
    const row = await subscriptionOf(user.id);
    expect(row).toMatchObject({ status: "active" });
    expect(row!.current_period_end.getTime()).toBe(nextEnd * 1000);
  });
});

/** Resolves once some session waits for the subscription's advisory lock (see subscriptions.server). */
async function waitingForSubscriptionLock(subId: string): Promise<void> {
  for (;;) {
    const rows = await db()`
      select 1 from pg_locks
      where locktype = 'advisory' and not granted
        and database = (select oid from pg_database where datname = current_database())
        and objid::bigint = (hashtext(${`billing-sub:${subId}`})::bigint & 4294967295)`;
    if (rows.length) return;
  }
}

describe("overlapping refreshes of one subscription", () => {
  it("an older read cannot be written after a newer one (active after canceled)", async () => {
    const user = await newUser();
    const { sub } = await subscribe(user, "solo");
    const subId = String(sub.id);
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let firstRead = () => {};
    const firstReadTaken = new Promise<void>((resolve) => {
      firstRead = resolve;
    });
    let reads = 0;
    // The first read's answer (`active`) is held back until the second refresh has run as far
    // as it can.
    fake.state.onSubscriptionRead = async (id) => {
      if (id !== subId || ++reads !== 1) return;
      firstRead();
      await gate;
    };
    try {
      const first = refreshSubscriptionFromStripe(subId, "refresh-1");
      await firstReadTaken;
      fake.updateSubscription(subId, { status: "canceled", canceled_at: 1_800_000_000 });
      const second = refreshSubscriptionFromStripe(subId, "refresh-2");
      // Reading outside the lock, the second finishes (writes canceled) here; reading under
      // it, it waits for the first.
      await Promise.race([second, waitingForSubscriptionLock(subId)]);
      release();
      await Promise.all([first, second]);
    } finally {
      fake.state.onSubscriptionRead = undefined;
      release();
    }
    expect(reads).toBe(2);
    expect(await subscriptionOf(user.id)).toMatchObject({ status: "canceled" });
    expect(await planOf(user.id)).toBe("free");
  });
});

describe("one-off purchases", () => {
  it("a credits checkout completed twice adds the credits once", async () => {
    const user = await newUser();
    const res = await as(user, payCredits, "/api/pay/credits?price=price_credits_500");
    const session = fake.completeSession(sessionIdOf(res.headers.get("location")!));
    const a = await deliver("checkout.session.completed", session);
    const b = await deliver("checkout.session.completed", session);
    await expect.poll(() => processed(a.json.id)).toBe(true);
    await expect.poll(() => processed(b.json.id)).toBe(true);
    expect(await creditBalance(user.id)).toBe(30);
    const summary = await as(user, billing, "/api/billing");
    expect(summary.json.credits).toBe(30);
  });

  it("an unpaid (open) session grants nothing", async () => {
    const user = await newUser();
    const res = await as(user, payCredits, "/api/pay/credits?price=price_credits_50");
    const session = fake.state.sessions.get(sessionIdOf(res.headers.get("location")!))!;
    const ev = await deliver("checkout.session.completed", session);
    await expect.poll(() => processed(ev.json.id)).toBe(true);
    expect(await creditBalance(user.id)).toBe(0);
  });

  it("a storage upgrade adds 50 GB once", async () => {
    const user = await newUser();
    const res = await as(user, storage, "/api/pay/storage-upgrade", { method: "POST" });
    const session = fake.completeSession(sessionIdOf(res.json.url));
    const evs = await Promise.all([
      deliver("checkout.session.completed", session),
      deliver("checkout.session.completed", session),
    ]);
    for (const ev of evs) await expect.poll(() => processed(ev.json.id)).toBe(true);
    expect(await storageLimitGb(user.id)).toBe(55);
    expect(await ledgerRows(user.id, "storage")).toBe(1);
    // The worker's storage pass for this user is queued: it raises the volume's limit live.
    const passes = await db()<{ n: number }[]>`select count(*)::int as n from pgboss.job
      where name = 'sample-storage' and data->>'userId' = ${user.id}`;
    expect(passes[0]?.n).toBeGreaterThanOrEqual(1);
  });
});
