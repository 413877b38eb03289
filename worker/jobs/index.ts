import type { JobName, JobPayload } from "../../app/server/platform/jobs.server.ts";
import { deliverWebhook } from "./deliver-webhook.ts";
import { processPaymentEvent } from "./process-payment-event.ts";
import { refreshModelCatalog } from "./refresh-model-catalog.ts";
import { sendEmail } from "./send-email.ts";
import { teardownInstance } from "./teardown-instance.ts";

export interface JobContext {
  jobId: string;
  retryCount: number;
  signal: AbortSignal;
}

type Handlers = { [N in JobName]: (payload: JobPayload<N>, ctx: JobContext) => Promise<unknown> };

/** Every job of the catalog has exactly one handler here (the type makes a missing one an error). */
export const handlers: Handlers = {
  "send-email": sendEmail,
  "refresh-model-catalog": refreshModelCatalog,
  "deliver-webhook": deliverWebhook,
  "teardown-instance": teardownInstance,
  "process-payment-event": processPaymentEvent,
};
