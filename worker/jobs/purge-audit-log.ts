import { usersWithAddon } from "../../app/server/billing/add-ons.server.ts";
import { AUDIT_RETENTION_DAYS } from "../../app/server/billing/catalog.server.ts";
import { purgeExpiredAudit } from "../../app/server/platform/audit.server.ts";

/** Deletes audit entries past retention: a year for Audit Logs holders, else 90 days. */
export async function purgeAuditLog() {
  const purged = await purgeExpiredAudit({
    days: AUDIT_RETENTION_DAYS.base,
    extendedDays: AUDIT_RETENTION_DAYS.withAddOn,
    extendedUserIds: await usersWithAddon("audit-logs"),
  });
  return { purged };
}
