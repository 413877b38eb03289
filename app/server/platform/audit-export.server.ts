import { z } from "zod";
import { allAudit, auditCsv, listAudit } from "./audit.server.ts";

// The audit log as the API and the pages hand it out: a JSON page, or every entry as a CSV or
// JSON download. `userId` null is every account's (the operator console; callers check).

export const auditQuery = z.object({
  format: z.enum(["json", "csv"]).default("json"),
  limit: z.coerce.number().int().min(1).max(500).default(50),
  before: z.coerce.number().int().positive().optional(),
  download: z.enum(["0", "1"]).optional(),
});
export type AuditQuery = z.infer<typeof auditQuery>;

async function collect(userId: string | null) {
  const entries = [];
  for await (const entry of allAudit(userId)) entries.push(entry);
  return entries;
}

const attachment = (ext: string) => ({
  "Content-Disposition": `attachment; filename="audit-log.${ext}"`,
  "Cache-Control": "no-store",
});

/** CSV (always the whole log), a JSON download (`download=1`), or a JSON page. */
export async function auditExport(userId: string | null, query: AuditQuery) {
  if (query.format === "csv") {
    return new Response(auditCsv(await collect(userId)), {
      headers: { "Content-Type": "text/csv; charset=utf-8", ...attachment("csv") },
    });
  }
  if (query.download === "1") {
    return new Response(JSON.stringify({ entries: await collect(userId) }), {
      headers: { "Content-Type": "application/json; charset=utf-8", ...attachment("json") },
    });
  }
  return listAudit({ userId, limit: query.limit, before: query.before });
}
