import type { JobPayload } from "../../app/server/platform/jobs.server.ts";
import { deliverMail } from "../../app/server/platform/mail.server.ts";

export async function sendEmail(payload: JobPayload<"send-email">) {
  return deliverMail(payload);
}
