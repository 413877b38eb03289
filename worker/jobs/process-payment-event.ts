import { processPaymentEvent as apply } from "../../app/server/billing/webhooks.server.ts";
import type { JobPayload } from "../../app/server/platform/jobs.server.ts";

/** Applies one stored Stripe event; idempotent, so a retry or a second worker changes nothing. */
export function processPaymentEvent(payload: JobPayload<"process-payment-event">) {
  return apply(payload.eventId);
}
