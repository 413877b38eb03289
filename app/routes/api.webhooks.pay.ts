import { apiRoute, endpoint } from "../server/api.server.ts";
import { receiveWebhook } from "../server/billing/webhooks.server.ts";
import { readRawBody } from "../server/platform/http.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Incoming payment-processor events (Stripe-signed)",
    description:
      "Bad or missing signature: 400, nothing stored. Kinds outside the six subscribed: 200, ignored. A replayed event id: 200, no effect.",
    auth: "none",
    handler: async ({ request }) => {
      // The signature covers the exact bytes: read the raw body (capped at 1 MiB while it
      // streams, 413 past it), never parse it first.
      const raw = (await readRawBody(request)).toString("utf8");
      const { result, eventId, type } = await receiveWebhook(
        raw,
        request.headers.get("stripe-signature"),
      );
      return { received: true, result, id: eventId, type };
    },
  }),
});
