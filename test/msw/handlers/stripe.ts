import { HttpResponse, http } from "msw";
import Stripe from "stripe";

// Stripe's API as it answers on the wire (stripe 23, API 2026-10-28): form-encoded requests
// with bracket keys, JSON objects back, errors as {error: {type, code, param, message}}. The fake
// is stateful: it remembers the customers, checkout sessions, subscriptions and invoices it
// made, and tests move them along (complete a session, cancel a subscription, fail an invoice)
// and sign the matching webhook events with the SDK's own test-header helper.

export const STRIPE_BASE = "https://api.stripe.com";
export const STRIPE_TEST_KEY = "sk_test_fake";
export const STRIPE_TEST_WEBHOOK_SECRET = "whsec_test_secret";

/** Price ids the tests configure (STRIPE_PRICE_*). */
export const testPrices = {
  STRIPE_PRICE_SOLO: "price_solo",
  STRIPE_PRICE_COLLECTIVE: "price_collective",
  STRIPE_PRICE_LABEL: "price_label",
  STRIPE_PRICE_NETWORK: "price_network",
  STRIPE_PRICE_ADDON_AUDIT_LOGS: "price_addon_audit",
  STRIPE_PRICE_ENTERPRISE_SUITE: "price_suite",
  STRIPE_PRICE_API_STARTER: "price_api_starter",
  STRIPE_PRICE_API_PRO: "price_api_pro",
  STRIPE_PRICE_API_SCALE: "price_api_scale",
  STRIPE_PRICE_CREDITS_50: "price_credits_50",
  STRIPE_PRICE_CREDITS_200: "price_credits_200",
  STRIPE_PRICE_CREDITS_500: "price_credits_500",
  STRIPE_PRICE_STORAGE_50GB: "price_storage_50gb",
} as const;

type Obj = Record<string, unknown>;

/** Parses Stripe's form encoding (a[b][0][c]=v) into nested objects and arrays. */
export function parseForm(text: string): Obj {
  const root: Obj = {};
  for (const [key, value] of new URLSearchParams(text)) {
    const parts = key.replace(/\]/g, "").split("[");
    let node: Obj = root;
    parts.forEach((part, i) => {
      if (i === parts.length - 1) {
        node[part] = value;
        return;
      }
      const nextIsIndex = /^\d+$/.test(parts[i + 1]!);
      node[part] ??= nextIsIndex ? [] : {};
      node = node[part] as Obj;
    });
  }
  return root;
}

const stripeError = (status: number, message: string, param?: string) =>
  HttpResponse.json(
    { error: { type: "invalid_request_error", code: "resource_missing", message, param } },
    { status },
  );

export interface StripeFakeState {
  customers: Map<string, Obj>;
  sessions: Map<string, Obj>;
  subscriptions: Map<string, Obj>;
  invoices: Map<string, Obj>;
  /** Every request: method, path and parsed form body. */
  calls: Array<{ method: string; path: string; body: Obj }>;
  /** Idempotency keys seen, to replay the same answer (Stripe's behaviour). */
  idempotent: Map<string, Obj>;
  /**
   * Called on each subscription read after the answer is taken (a copy of the state then) and
   * before it is sent: a test can hold one read's answer to make it arrive late.
   */
  onSubscriptionRead?: (subscriptionId: string) => Promise<void> | void;
}

let counter = 0;
const id = (prefix: string) =>
  `${prefix}_test${Date.now().toString(36)}${(++counter).toString(36)}`;
const now = () => Math.floor(Date.now() / 1000);
const MONTH = 30 * 24 * 60 * 60;

export function createStripeFake(base = STRIPE_BASE) {
  const state: StripeFakeState = {
    customers: new Map(),
    sessions: new Map(),
    subscriptions: new Map(),
    invoices: new Map(),
    calls: [],
    idempotent: new Map(),
  };

  const read = async (request: Request) => {
    const body = parseForm(await request.text());
    state.calls.push({ method: request.method, path: new URL(request.url).pathname, body });
    return body;
  };
  const authorized = (request: Request) =>
    request.headers.get("authorization") === `Bearer ${STRIPE_TEST_KEY}`;
  const unauthorized = () =>
    HttpResponse.json(
      { error: { type: "invalid_request_error", message: "Invalid API Key provided" } },
      { status: 401 },
    );

  function subscriptionObject(fields: {
    customer: string;
    price: string;
    metadata: Obj;
    status?: string;
    /** Further line items (seats): price and quantity each. */
    more?: Array<{ price: string; quantity: number }>;
  }): Obj {
    const subId = id("sub");
    const start = now();
    const item = (price: string, quantity: number) => ({
      id: id("si"),
      object: "subscription_item",
      price: { id: price, object: "price" },
      quantity,
      current_period_start: start,
      current_period_end: start + MONTH,
    });
    return {
      id: subId,
      object: "subscription",
      customer: fields.customer,
      status: fields.status ?? "active",
      metadata: fields.metadata,
      cancel_at_period_end: false,
      canceled_at: null,
      created: start,
      items: {
        object: "list",
        data: [item(fields.price, 1), ...(fields.more ?? []).map((m) => item(m.price, m.quantity))],
      },
    };
  }

  const handlers = [
    http.post(`${base}/v1/customers`, async ({ request }) => {
      if (!authorized(request)) return unauthorized();
      const body = await read(request);
      const key = request.headers.get("idempotency-key");
      if (key && state.idempotent.has(key)) return HttpResponse.json(state.idempotent.get(key));
      const customer = {
        id: id("cus"),
        object: "customer",
        email: body.email,
        name: body.name,
        metadata: body.metadata ?? {},
        created: now(),
      };
      state.customers.set(customer.id, customer);
      if (key) state.idempotent.set(key, customer);
      return HttpResponse.json(customer);
    }),
    http.post(`${base}/v1/customers/:id`, async ({ request, params }) => {
      if (!authorized(request)) return unauthorized();
      const body = await read(request);
      const customer = state.customers.get(String(params.id));
      if (!customer) return stripeError(404, `No such customer: '${params.id}'`, "id");
      Object.assign(customer, body);
      return HttpResponse.json(customer);
    }),
    http.post(`${base}/v1/checkout/sessions`, async ({ request }) => {
      if (!authorized(request)) return unauthorized();
      const body = await read(request);
      if (typeof body.customer === "string" && !state.customers.has(body.customer)) {
        return stripeError(400, `No such customer: '${body.customer}'`, "customer");
      }
      const sessionId = id("cs");
      const session = {
        id: sessionId,
        object: "checkout.session",
        mode: body.mode,
        customer: body.customer ?? null,
        client_reference_id: body.client_reference_id ?? null,
        metadata: body.metadata ?? {},
        line_items_for_test: body.line_items,
        subscription_data_for_test: body.subscription_data ?? null,
        success_url: body.success_url,
        cancel_url: body.cancel_url,
        status: "open",
        payment_status: "unpaid",
        subscription: null,
        url: `https://checkout.stripe.com/c/pay/${sessionId}`,
        created: now(),
      };
      state.sessions.set(sessionId, session);
      return HttpResponse.json(session);
    }),
    http.get(`${base}/v1/checkout/sessions/:id`, ({ request, params }) => {
      if (!authorized(request)) return unauthorized();
      const session = state.sessions.get(String(params.id));
      if (!session) return stripeError(404, `No such checkout.session: '${params.id}'`, "id");
      return HttpResponse.json(session);
    }),
    http.get(`${base}/v1/subscriptions/:id`, async ({ request, params }) => {
      if (!authorized(request)) return unauthorized();
      const sub = state.subscriptions.get(String(params.id));
      if (!sub) return stripeError(404, `No such subscription: '${params.id}'`, "id");
      const answer = structuredClone(sub);
      await state.onSubscriptionRead?.(String(params.id));
      return HttpResponse.json(answer);
    }),
    http.post(`${base}/v1/subscriptions/:id`, async ({ request, params }) => {
      if (!authorized(request)) return unauthorized();
      const body = await read(request);
      const sub = state.subscriptions.get(String(params.id));
      if (!sub) return stripeError(404, `No such subscription: '${params.id}'`, "id");
      const key = request.headers.get("idempotency-key");
      if (key && state.idempotent.has(key)) return HttpResponse.json(state.idempotent.get(key));
      const items = body.items as
        | Array<{ id?: string; price?: string; quantity?: string; deleted?: string }>
        | undefined;
      const data = (sub.items as { data: Obj[] }).data;
      for (const change of items ?? []) {
        const item = change.id ? data.find((i) => i.id === change.id) : undefined;
        if (change.id && !item) return stripeError(400, `No such item: '${change.id}'`, "items");
        if (item && change.deleted === "true") data.splice(data.indexOf(item), 1);
        else if (item) {
          if (change.price) item.price = { id: change.price, object: "price" };
          if (change.quantity) item.quantity = Number(change.quantity);
        } else if (change.price) {
          const first = data[0] as Obj;
          data.push({
            id: id("si"),
            object: "subscription_item",
            price: { id: change.price, object: "price" },
            quantity: Number(change.quantity ?? 1),
            current_period_start: first.current_period_start,
            current_period_end: first.current_period_end,
          });
        }
      }
      if (body.metadata) sub.metadata = body.metadata;
      const answer = structuredClone(sub);
      if (key) state.idempotent.set(key, answer);
      return HttpResponse.json(answer);
    }),
    http.get(`${base}/v1/invoices/:id`, ({ request, params }) => {
      if (!authorized(request)) return unauthorized();
      const invoice = state.invoices.get(String(params.id));
      if (!invoice) return stripeError(404, `No such invoice: '${params.id}'`, "id");
      return HttpResponse.json(invoice);
    }),
    http.post(`${base}/v1/billing_portal/sessions`, async ({ request }) => {
      if (!authorized(request)) return unauthorized();
      const body = await read(request);
      if (!state.customers.has(String(body.customer))) {
        return stripeError(400, `No such customer: '${body.customer}'`, "customer");
      }
      const portalId = id("bps");
      return HttpResponse.json({
        id: portalId,
        object: "billing_portal.session",
        customer: body.customer,
        return_url: body.return_url,
        url: `https://billing.stripe.com/p/session/${portalId}`,
      });
    }),
  ];

  /** The customer completes a checkout session (paid); subscription mode creates the subscription. */
  function completeSession(sessionId: string, opts: { status?: string } = {}): Obj {
    const session = state.sessions.get(sessionId);
    if (!session) throw new Error(`no session ${sessionId}`);
    if (session.status === "complete") return session;
    session.status = "complete";
    session.payment_status = "paid";
    if (session.mode === "subscription") {
      const lineItems = session.line_items_for_test as Array<{ price: string; quantity?: string }>;
      const subData = session.subscription_data_for_test as { metadata?: Obj } | null;
      const sub = subscriptionObject({
        customer: String(session.customer),
        price: lineItems[0]!.price,
        more: lineItems
          .slice(1)
          .map((l) => ({ price: l.price, quantity: Number(l.quantity ?? 1) })),
        metadata: subData?.metadata ?? {},
        ...(opts.status ? { status: opts.status } : {}),
      });
      state.subscriptions.set(String(sub.id), sub);
      session.subscription = sub.id;
    }
    return session;
  }

  /** Changes a subscription the way Stripe would (status, cancellation, renewal). */
  function updateSubscription(subId: string, patch: Obj & { periodEnd?: number }): Obj {
    const sub = state.subscriptions.get(subId);
    if (!sub) throw new Error(`no subscription ${subId}`);
    const { periodEnd, ...rest } = patch;
    Object.assign(sub, rest);
    if (periodEnd !== undefined) {
      (sub.items as { data: Obj[] }).data[0]!.current_period_end = periodEnd;
    }
    return sub;
  }

  function createInvoice(subId: string, status: "paid" | "open"): Obj {
    const sub = state.subscriptions.get(subId);
    if (!sub) throw new Error(`no subscription ${subId}`);
    const invoice = {
      id: id("in"),
      object: "invoice",
      number: `INV-${counter}`,
      customer: sub.customer,
      status,
      parent: {
        type: "subscription_details",
        subscription_details: { subscription: subId, metadata: sub.metadata },
      },
    };
    state.invoices.set(invoice.id, invoice);
    return invoice;
  }

  return { state, handlers, completeSession, updateSubscription, createInvoice };
}

export type StripeFake = ReturnType<typeof createStripeFake>;

/** A signed webhook delivery for an event about `object`. */
export function signedEvent(
  type: string,
  object: Obj,
  opts: { id?: string; secret?: string; timestamp?: number } = {},
) {
  const payload = JSON.stringify({
    id: opts.id ?? id("evt"),
    object: "event",
    api_version: "2026-10-28.endive",
    created: now(),
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
    data: { object },
  });
  const header = Stripe.webhooks.generateTestHeaderString({
    payload,
    secret: opts.secret ?? STRIPE_TEST_WEBHOOK_SECRET,
    ...(opts.timestamp !== undefined ? { timestamp: opts.timestamp } : {}),
  });
  return { payload, header };
}
