import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { selfHosted } from "./plan-assignments.server.ts";
import { stripe } from "./stripe.server.ts";
import {
  currentPlanSubscription,
  GRANTING_STATUSES,
  updateSubscriptionInStripe,
} from "./subscriptions.server.ts";

// Seats bought through the payment processor (issue 48, decision 0215): a quantity of the seat
// price (STRIPE_PRICE_SEAT) on the owner's plan subscription. More seats are prorated and billed
// as Stripe does (create_prorations); fewer are not refunded: the quantity drops at once in
// Stripe, so the next invoice is lower, while the platform keeps the seats paid for until the
// period ends (subscriptions.server.ts keptSeats). The count the platform uses is only ever
// what Stripe says (the webhook's re-read, or the answer of this change).

/** Statuses whose seats count (the plan stays while Stripe retries a payment). */
const SEAT_STATUSES = [...GRANTING_STATUSES, "past_due"];

/** Seats bought for `ownerId`, counting lowered ones until their paid period ends. */
export async function paidSeats(ownerId: string): Promise<number> {
  const [row] = await db()<{ seats: number }[]>`
    select coalesce(sum(greatest(seat_quantity,
      case when seats_kept_until > now() then seats_kept else 0 end)), 0)::int as seats
    from subscriptions where user_id = ${ownerId} and status = any(${SEAT_STATUSES})`;
  return row?.seats ?? 0;
}

/** The most seats one organisation buys here (beyond: the network plan, or ask us). */
export const MAX_PAID_SEATS = 1000;

/**
 * Sets the seats `ownerId` buys on its plan subscription to `seats`. 409 without a live plan
 * subscription (or in self-hosted mode, where operators give seats), 503 without a seat price.
 * The same change asked twice is one change at Stripe: its idempotency key names the change and
 * the stored subscription's version, so a retry replays it and a later, equal-looking change
 * (2 to 3 again after 3 to 2) is a new one.
 */
export async function setPaidSeats(ownerId: string, seats: number): Promise<void> {
  if (!Number.isInteger(seats) || seats < 0 || seats > MAX_PAID_SEATS) {
    throw new DomainError(400, `seats: a whole number from 0 to ${MAX_PAID_SEATS}`);
  }
  if (selfHosted()) {
    throw new DomainError(409, "This server takes no payments: its operator gives seats in /ops");
  }
  const price = env().STRIPE_PRICE_SEAT;
  if (!price)
    throw new DomainError(503, "No Stripe price is configured for seats (STRIPE_PRICE_SEAT)");
  const current = await currentPlanSubscription(ownerId);
  if (!current) {
    throw new DomainError(
      409,
      "No live plan subscription: subscribe the organisation to a plan first (GET /api/pay/checkout?plan=<plan>&seats=<n> with X-Organization)",
    );
  }
  await updateSubscriptionInStripe(current.id, `seats:${seats}`, async (sub) => {
    const item = sub.items.data.find((i) => i.price?.id === price);
    const from = item?.quantity ?? 0;
    if (from === seats) return sub;
    const more = seats > from;
    const change = item
      ? seats === 0
        ? { id: item.id, deleted: true }
        : { id: item.id, quantity: seats }
      : { price, quantity: seats };
    return stripe().subscriptions.update(
      sub.id,
      {
        items: [change],
        // More: prorated now, as Stripe computes it. Fewer: nothing refunded; the paid period
        // keeps its seats here and the next invoice bills the lower count.
        proration_behavior: more ? "create_prorations" : "none",
      },
      { idempotencyKey: `seats:${sub.id}:${from}->${seats}:${current.updated_at.getTime()}` },
    );
  });
}
