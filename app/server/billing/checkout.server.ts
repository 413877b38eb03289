import type { User } from "../accounts/model.server.ts";
import { billingContactOf } from "../organisations/billing-contact.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import {
  addOns,
  type CatalogItem,
  type CreditPackId,
  creditPacks,
  findItem,
  type ItemKind,
  itemByPriceId,
  priceIdOf,
  STORAGE_UPGRADE_GB,
} from "./catalog.server.ts";
import { type Stripe, stripe, stripeFailure } from "./stripe.server.ts";

// Stripe Checkout: every purchase (plan, add-on, suite, billing-API plan, credit pack, storage)
// is a Checkout session for the user's one Stripe customer, with the user id in
// client_reference_id and metadata. Fulfilment happens only from webhooks (webhooks.server.ts).
// An organisation buys as a user does, its customer carrying its billing contact's email
// (decision 0215); its plan checkout may carry extra seats.

type Buyer = Pick<User, "id" | "email" | "name"> & { kind?: User["kind"] };

/** Who the processor's customer is: a person, or an organisation with its contact's email. */
export async function billingIdentity(buyer: Buyer): Promise<Pick<User, "id" | "email" | "name">> {
  if (buyer.kind !== "organisation") return buyer;
  const contact = await billingContactOf(buyer.id);
  if (!contact) throw new DomainError(409, "The organisation has no billing contact with an email");
  return { id: buyer.id, email: contact.email, name: buyer.name };
}

/** The user's Stripe customer id, created once (Stripe's idempotency key guards a race). */
export async function ensureCustomer(buyer: Buyer): Promise<string> {
  const user = await billingIdentity(buyer);
  const [existing] = await db()<{ stripe_customer_id: string }[]>`
    select stripe_customer_id from billing_customers where user_id = ${user.id}`;
  if (existing) return existing.stripe_customer_id;
  let customer: Stripe.Customer;
  try {
    customer = await stripe().customers.create(
      { email: user.email, name: user.name, metadata: { userId: user.id } },
      { idempotencyKey: `customer-${user.id}` },
    );
  } catch (error) {
    throw stripeFailure(error);
  }
  const [row] = await db()<{ stripe_customer_id: string }[]>`
    insert into billing_customers (user_id, stripe_customer_id) values (${user.id}, ${customer.id})
    on conflict (user_id) do update set user_id = excluded.user_id
    returning stripe_customer_id`;
  return row!.stripe_customer_id;
}

/** An organisation's customer takes its billing contact's new email (no customer yet: nothing). */
export async function syncCustomerEmail(ownerId: string, email: string): Promise<void> {
  const customer = await customerIdOf(ownerId);
  if (!customer) return;
  try {
    await stripe().customers.update(customer, { email });
  } catch (error) {
    throw stripeFailure(error);
  }
}

export async function customerIdOf(userId: string): Promise<string | undefined> {
  const [row] = await db()<{ stripe_customer_id: string }[]>`
    select stripe_customer_id from billing_customers where user_id = ${userId}`;
  return row?.stripe_customer_id;
}

export async function userIdOfCustomer(customerId: string): Promise<string | undefined> {
  const [row] = await db()<{ user_id: string }[]>`
    select user_id from billing_customers where stripe_customer_id = ${customerId}`;
  return row?.user_id;
}

/**
 * Statuses in which a Stripe subscription still exists and can bill (or resume billing): every
 * status but the final `canceled` and `incomplete_expired`. A checkout for a kind the user holds
 * in one of these would open a second, also billed, subscription.
 */
export const LIVE_STATUSES = ["active", "trialing", "past_due", "incomplete", "unpaid", "paused"];

/** 409: the user already has a live subscription of this kind (decision 0040, amended). */
export class AlreadySubscribed extends DomainError {
  constructor(message: string) {
    super(409, message);
    this.name = "AlreadySubscribed";
  }
}

const kindNames: Partial<Record<ItemKind, string>> = {
  plan: "plan",
  addon: "add-on",
  suite: "suite",
  api: "billing-API plan",
};

/**
 * Refuses a subscription checkout when the user already has a live subscription of the kind
 * (one plan, one billing-API plan, one suite; each add-on once). Plan changes go through
 * changePlan (the plan buttons on /billing), which updates the existing subscription.
 */
async function refuseSecondSubscription(userId: string, kind: ItemKind, id: string) {
  const name = kindNames[kind];
  if (!name) return;
  const [live] = await db()<{ item: string; status: string }[]>`
    select item, status from subscriptions
    where user_id = ${userId} and kind = ${kind} and status = any(${LIVE_STATUSES})
      and (${kind} <> 'addon' or item = ${id})
    order by updated_at desc limit 1`;
  if (!live) return;
  const how =
    kind === "plan" && ["active", "trialing", "past_due"].includes(live.status)
      ? "change plan on /billing, which updates that subscription"
      : "manage it on /billing (customer portal)";
  throw new AlreadySubscribed(
    `You already have a ${name} subscription (${live.item}, ${live.status}): ${how} instead of opening a second one`,
  );
}

const absolute = (path: string) => new URL(path, env().APP_URL).toString();

export interface CheckoutOptions {
  successPath?: string;
  cancelPath?: string;
  /** Extra gateway seats on an organisation's plan subscription (STRIPE_PRICE_SEAT). */
  seats?: number;
}

/** The seat price's line, or none; 400 for a person, 503 without a seat price. */
function seatLine(buyer: Buyer, kind: ItemKind, seats: number | undefined) {
  if (!seats) return [];
  if (buyer.kind !== "organisation" || kind !== "plan") {
    throw new DomainError(400, "seats: extra seats are bought with an organisation's plan");
  }
  const price = env().STRIPE_PRICE_SEAT;
  if (!price)
    throw new DomainError(503, "No Stripe price is configured for seats (STRIPE_PRICE_SEAT)");
  return [{ price, quantity: seats }];
}

/** A Checkout session for one catalog item; returns its URL. */
export async function createCheckout(
  user: Buyer,
  kind: ItemKind,
  id: string,
  options: CheckoutOptions = {},
): Promise<{ url: string; sessionId: string }> {
  const item: CatalogItem | undefined = findItem(kind, id);
  if (!item) throw new DomainError(400, `Unknown ${kind} '${id}'`);
  const addOn = kind === "addon" ? addOns.find((a) => a.id === id) : undefined;
  if (addOn?.fulfilment === "request") {
    // Nothing automatic is behind it: no money is taken for it (decision 0101).
    throw new DomainError(
      409,
      `${addOn.name} is not sold by checkout: request it on /billing and an operator contacts you`,
    );
  }
  const price = priceIdOf(item.priceVar);
  const client = stripe();
  if (!price) {
    throw new DomainError(
      503,
      `No Stripe price is configured for ${kind} '${id}' (${item.priceVar})`,
    );
  }
  await refuseSecondSubscription(user.id, kind, id);
  const seats = seatLine(user, kind, options.seats);
  const customer = await ensureCustomer(user);
  const payment = kind === "credits" || kind === "storage";
  const metadata = { userId: user.id, kind, item: id };
  const params: Stripe.Checkout.SessionCreateParams = {
    mode: payment ? "payment" : "subscription",
    customer,
    client_reference_id: user.id,
    line_items: [{ price, quantity: 1 }, ...seats],
    metadata,
    success_url: absolute(options.successPath ?? "/billing?checkout=success"),
    cancel_url: absolute(options.cancelPath ?? "/billing?checkout=canceled"),
    ...(payment ? {} : { subscription_data: { metadata } }),
  };
  let session: Stripe.Checkout.Session;
  try {
    session = await client.checkout.sessions.create(params);
  } catch (error) {
    throw stripeFailure(error);
  }
  if (!session.url) throw new DomainError(502, "Payment processor returned no checkout URL");
  return { url: session.url, sessionId: session.id };
}

/** Credits checkout by Stripe price id (only the configured credit-pack prices). */
export function creditCheckoutByPrice(user: Buyer, price: string) {
  const item = itemByPriceId(price);
  if (item?.kind !== "credits") {
    throw new DomainError(400, "price: not one of the allowed credit prices");
  }
  return createCheckout(user, "credits", item.id);
}

export function creditCheckoutByPack(user: Buyer, pack: CreditPackId) {
  if (!creditPacks.some((c) => c.id === pack)) throw new DomainError(400, "pack: unknown pack");
  return createCheckout(user, "credits", pack);
}

/** The storage upgrade: success and cancel land on the files dashboard. */
export async function createStorageCheckout(user: Buyer) {
  try {
    return await createCheckout(user, "storage", "storage-50gb", {
      successPath: `/files?upgrade=success&gb=${STORAGE_UPGRADE_GB}`,
      cancelPath: "/files?error=upgrade-canceled",
    });
  } catch (error) {
    // The contract: 500 when the processor is not configured or the checkout fails.
    if (error instanceof DomainError && error.status >= 500) {
      throw new DomainError(500, error.message);
    }
    throw error;
  }
}

/** A customer-portal session URL for the user (manage payment methods, cancel, invoices). */
export async function createPortalSession(userId: string, returnPath = "/billing") {
  const client = stripe();
  const customer = await customerIdOf(userId);
  if (!customer) throw new DomainError(409, "No billing account yet: subscribe or buy first");
  try {
    const session = await client.billingPortal.sessions.create({
      customer,
      return_url: absolute(returnPath),
    });
    return { url: session.url };
  } catch (error) {
    throw stripeFailure(error);
  }
}
