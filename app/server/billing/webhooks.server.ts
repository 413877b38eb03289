import { randomUUID } from "node:crypto";
import type postgres from "postgres";
import { MICRO_USD_PER_CREDIT } from "../accounts/credits.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { hasLiveJob, sendJob } from "../platform/jobs.server.ts";
import { logger } from "../platform/logger.server.ts";
import { creditPacks, STORAGE_UPGRADE_GB } from "./catalog.server.ts";
import { userIdOfCustomer } from "./checkout.server.ts";
import { type Stripe, stripe, stripeFailure, verifyWebhook } from "./stripe.server.ts";
import { refreshSubscriptionFromStripe } from "./subscriptions.server.ts";

// Incoming Stripe events: POST /api/webhooks/pay verifies the signature on the raw body, keeps
// the six subscribed kinds, stores each event id once and enqueues `process-payment-event`.
// The job re-reads the session, subscription or invoice from Stripe (the payload is only a
// hint of what changed) and applies effects that are idempotent by construction: credits and
// storage keyed by checkout session, subscription state overwritten with Stripe's current one.
// docs/decisions/0042-payment-webhooks.md

export const subscribedEvents = [
  "checkout.session.completed",
  "customer.subscription.created",
  "customer.subscription.updated",
  "customer.subscription.deleted",
  "invoice.payment_succeeded",
  "invoice.payment_failed",
] as const;
export type SubscribedEvent = (typeof subscribedEvents)[number];

const isSubscribed = (type: string): type is SubscribedEvent =>
  (subscribedEvents as readonly string[]).includes(type);

export type ReceiveResult = "queued" | "duplicate" | "ignored";

/**
 * Runs fn with a session lock on the event id, on one reserved connection in autocommit (its
 * insert is visible to the job at once), so deliveries of one event decide one at a time and
 * concurrent duplicates enqueue once. Needs no second connection of the pool while holding it.
 */
async function underEventLock<T>(
  eventId: string,
  fn: (c: postgres.ReservedSql) => Promise<T>,
): Promise<T> {
  const c = await db().reserve();
  const key = `payment-event:${eventId}`;
  try {
    await c`select pg_advisory_lock(hashtext(${key}))`;
    try {
      return await fn(c);
    } finally {
      await c`select pg_advisory_unlock(hashtext(${key}))`;
    }
  } finally {
    c.release();
  }
}

/** Verifies, filters, stores once and enqueues one webhook delivery. */
export async function receiveWebhook(
  rawBody: string,
  signature: string | null,
): Promise<{ result: ReceiveResult; eventId: string; type: string }> {
  const event = verifyWebhook(rawBody, signature);
  if (!isSubscribed(event.type)) return { result: "ignored", eventId: event.id, type: event.type };
  const object = event.data.object as { id?: string };
  const objectId = object?.id;
  if (!objectId) throw new DomainError(400, "Event carries no object id");
  const queued = await underEventLock(event.id, async (c) => {
    const inserted = await c`
      insert into payment_events (id, type, object_id, livemode)
      values (${event.id}, ${event.type}, ${objectId}, ${event.livemode})
      on conflict (id) do nothing returning id`;
    if (inserted.length === 0) {
      // Stored before: a no-op while its job is pending or once processed; otherwise its job
      // failed for good (or was lost), and this resend is the way to process it again. The job
      // is asked first: it sets processed_at before it leaves the live states, so a job that
      // ends between the two reads is seen as processed (the other order enqueued it twice).
      if (await hasLiveJob("process-payment-event", { eventId: event.id })) return false;
      const [row] = await c<{ processed_at: Date | null }[]>`
        select processed_at from payment_events where id = ${event.id}`;
      if (row?.processed_at) return false;
    }
    try {
      await sendJob("process-payment-event", { eventId: event.id });
    } catch (error) {
      // Not queued: forget a new event so Stripe's retry is accepted again.
      if (inserted.length) await c`delete from payment_events where id = ${event.id}`;
      throw error;
    }
    return true;
  });
  if (!queued) return { result: "duplicate", eventId: event.id, type: event.type };
  return { result: "queued", eventId: event.id, type: event.type };
}

interface StoredEvent {
  id: string;
  type: string;
  object_id: string;
  processed_at: Date | null;
}

/** The job: apply one stored event by re-reading its object from Stripe. Safe to run twice. */
export async function processPaymentEvent(eventId: string): Promise<{ effect: string }> {
  const [event] = await db()<StoredEvent[]>`
    update payment_events set attempts = attempts + 1 where id = ${eventId}
    returning id, type, object_id, processed_at`;
  if (!event) return { effect: "unknown event" };
  try {
    const effect = await apply(event);
    await db()`update payment_events set processed_at = now(), last_error = null
      where id = ${eventId}`;
    return { effect };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    await db()`update payment_events set last_error = ${message.slice(0, 500)} where id = ${eventId}`;
    throw error;
  }
}

async function apply(event: StoredEvent): Promise<string> {
  switch (event.type as SubscribedEvent) {
    case "checkout.session.completed":
      return applyCheckoutSession(event.object_id, event.id);
    case "customer.subscription.created":
    case "customer.subscription.updated":
    case "customer.subscription.deleted": {
      const userId = await refreshSubscriptionFromStripe(event.object_id, event.id);
      return userId ? "subscription synced" : "subscription not ours";
    }
    case "invoice.payment_succeeded":
    case "invoice.payment_failed":
      return applyInvoice(event.object_id, event.type, event.id);
    default:
      return "ignored";
  }
}

const idOf = (value: string | { id: string } | null | undefined) =>
  typeof value === "string" ? value : value?.id;

async function retrieve<T>(load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    throw stripeFailure(error);
  }
}

async function applyCheckoutSession(sessionId: string, eventId: string): Promise<string> {
  const session = await retrieve(() => stripe().checkout.sessions.retrieve(sessionId));
  const customerId = idOf(session.customer);
  const userId =
    session.metadata?.userId ||
    session.client_reference_id ||
    (customerId ? await userIdOfCustomer(customerId) : undefined);
  if (!userId) return "session without a user";
  if (session.status !== "complete") return `session ${session.status}`;
  const paid =
    session.payment_status === "paid" || session.payment_status === "no_payment_required";
  const kind = session.metadata?.kind;
  if (session.mode === "subscription") {
    const subscriptionId = idOf(session.subscription);
    if (!subscriptionId) return "subscription session without a subscription";
    await refreshSubscriptionFromStripe(subscriptionId, eventId);
    return "subscription synced";
  }
  if (!paid) return `session not paid (${session.payment_status})`;
  if (kind === "credits") return grantCredits(userId, session);
  if (kind === "storage") return grantStorage(userId, session.id);
  return "payment session of no known kind";
}

async function grantCredits(userId: string, session: Stripe.Checkout.Session): Promise<string> {
  const pack = creditPacks.find((c) => c.id === session.metadata?.item);
  if (!pack) return "unknown credit pack";
  // One ledger row per checkout session: credit_ledger's unique (user, reason, reference).
  const rows = await db()`
    insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference)
    values (${`led_${randomUUID()}`}, ${userId}, ${pack.credits * MICRO_USD_PER_CREDIT},
      'purchase', ${session.id})
    on conflict (user_id, reason, reference) do nothing returning id`;
  if (!rows.length) return "credits already granted";
  await recordAudit({
    action: "credits.changed",
    userId,
    target: session.id,
    details: { reason: "purchase", amountMicroUsd: pack.credits * MICRO_USD_PER_CREDIT },
  });
  return `credited ${pack.credits}`;
}

async function grantStorage(userId: string, sessionId: string): Promise<string> {
  return db()
    .begin(async (t) => {
      const rows = await t`
      insert into storage_grants (checkout_session_id, user_id, gigabytes)
      values (${sessionId}, ${userId}, ${STORAGE_UPGRADE_GB})
      on conflict (checkout_session_id) do nothing returning checkout_session_id`;
      if (!rows.length) return "storage already granted";
      await t`insert into billing_ledger (user_id, kind, item, detail, reference)
      values (${userId}, 'storage', 'storage-50gb', ${`+${STORAGE_UPGRADE_GB} GB`}, ${sessionId})`;
      return `storage +${STORAGE_UPGRADE_GB} GB`;
    })
    .then(async (outcome) => {
      // The worker's storage pass raises the volume's limit live (decision 0217); sent again on
      // a replay too (idempotent), so a crash between the grant and the send loses nothing.
      await sendJob("sample-storage", { userId });
      return outcome;
    });
}

/** The subscription an invoice belongs to (API 2026: under parent.subscription_details). */
function subscriptionOfInvoice(invoice: Stripe.Invoice): string | undefined {
  const fromParent = idOf(invoice.parent?.subscription_details?.subscription);
  if (fromParent) return fromParent;
  const legacy = (invoice as unknown as { subscription?: string | { id: string } }).subscription;
  return idOf(legacy);
}

async function applyInvoice(invoiceId: string, type: string, eventId: string): Promise<string> {
  const invoice = await retrieve(() => stripe().invoices.retrieve(invoiceId));
  const subscriptionId = subscriptionOfInvoice(invoice);
  const userId = subscriptionId
    ? await refreshSubscriptionFromStripe(subscriptionId, eventId)
    : await userIdOfCustomer(idOf(invoice.customer) ?? "");
  if (type === "invoice.payment_succeeded") {
    return subscriptionId ? "period synced from subscription" : "invoice without subscription";
  }
  if (!userId) return "payment failure for no known user";
  // payment_failed: one ledger row and one email per invoice (a unique index guards it).
  const noted = await db()`
    insert into billing_ledger (user_id, subscription_id, kind, detail, reference)
    values (${userId}, ${subscriptionId ?? null}, 'payment_failed',
      ${`invoice ${invoiceId} payment failed`}, ${invoiceId})
    on conflict do nothing returning id`;
  if (!noted.length) return "payment failure already noted";
  const [user] = await db()<{ email: string; name: string }[]>`
    select email, name from users where id = ${userId}`;
  if (user) {
    await sendJob("send-email", {
      to: user.email,
      subject: "Your payment failed",
      text:
        `Hello ${user.name},\n\nWe could not collect the payment for your subscription ` +
        `(invoice ${invoice.number ?? invoiceId}). Your subscription is past due; please update ` +
        `your payment method: ${new URL("/billing", env().APP_URL)}\n`,
    });
  }
  logger().info({ userId, invoiceId }, "payment failed: user notified");
  return "payment failure noted";
}
