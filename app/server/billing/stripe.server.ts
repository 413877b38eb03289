import Stripe from "stripe";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";

// The one Stripe client, configured by STRIPE_SECRET_KEY and STRIPE_API_BASE. Its fetch is
// looked up on every call (not captured at construction), so msw in tests intercepts it.

export type { Stripe };

let cached: { key: string; client: Stripe } | undefined;

export const stripeConfigured = () => Boolean(env().STRIPE_SECRET_KEY);

/** The Stripe client; a 503 DomainError when no secret key is configured. */
export function stripe(): Stripe {
  const { STRIPE_SECRET_KEY, STRIPE_API_BASE, NODE_ENV } = env();
  if (!STRIPE_SECRET_KEY) {
    throw new DomainError(503, "Payments are not configured (STRIPE_SECRET_KEY is not set)");
  }
  const cacheKey = `${STRIPE_SECRET_KEY}|${STRIPE_API_BASE}`;
  if (cached?.key !== cacheKey) {
    const base = new URL(STRIPE_API_BASE);
    const protocol = base.protocol === "http:" ? "http" : "https";
    cached = {
      key: cacheKey,
      client: new Stripe(STRIPE_SECRET_KEY, {
        host: base.hostname,
        port: base.port || (protocol === "http" ? 80 : 443),
        protocol,
        httpClient: Stripe.createFetchHttpClient((url, init) => globalThis.fetch(url, init)),
        maxNetworkRetries: NODE_ENV === "test" ? 0 : 2,
        timeout: 20_000,
        appInfo: { name: "agent-platform" },
      }),
    };
  }
  return cached.client;
}

/** Verifies a webhook's signature on its raw body; throws on any mismatch. */
export function verifyWebhook(rawBody: string, signature: string | null): Stripe.Event {
  const secret = env().STRIPE_WEBHOOK_SECRET;
  if (!secret) throw new DomainError(503, "Payment webhooks are not configured");
  if (!signature) throw new DomainError(400, "Missing Stripe-Signature header");
  try {
    // The verifier needs no API key; a client without one is fine for this.
    return Stripe.webhooks.constructEvent(rawBody, signature, secret);
  } catch {
    throw new DomainError(400, "Invalid webhook signature");
  }
}

/** Maps a failed Stripe call to a DomainError (502: the processor refused or is unreachable). */
export function stripeFailure(error: unknown, status = 502): DomainError {
  if (error instanceof DomainError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new DomainError(status, `Payment processor error: ${message}`);
}
