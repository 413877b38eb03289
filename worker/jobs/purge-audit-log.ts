import { usersWithAddOn } from "../../app/server/billing/subscriptions.server.ts";
import { purgeExpiredAudit } from "../../app/server/platform/audit.server.ts";

/** Deletes audit entries past retention: a year for Audit Logs add-on holders, else 90 days. */
export async function purgeAuditLog() {
  const extended = await usersWithAddOn("audit-logs");
  return { purged: await purgeExpiredAudit(extended) };
}
