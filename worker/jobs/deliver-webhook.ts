import { deliverEvent } from "../../app/server/accounts/events.server.ts";
import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import type { JobContext } from "./context.ts";

/** One signed POST of an event to one endpoint; a non-2xx throws so pg-boss retries. */
export async function deliverWebhook(payload: JobPayload<"deliver-webhook">, ctx: JobContext) {
  return deliverEvent(payload.eventId, payload.url, ctx.retryCount + 1);
}
