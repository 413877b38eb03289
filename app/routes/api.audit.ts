import { apiRoute, endpoint } from "../server/api.server.ts";
import { auditExport, auditQuery } from "../server/platform/audit-export.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The caller's audit log, newest first",
    description:
      "Security- and money-relevant actions on the account (sign-ins, keys, sessions, plan and credit changes, agents, operator actions). format=json pages with limit and before (the previous page's nextCursor); format=csv exports every entry kept (90 days, one year with the Audit Logs add-on).",
    auth: "user",
    permission: "audit.read",
    rateLimit: "metrics",
    query: auditQuery,
    handler: ({ auth, query }) => auditExport(auth.user.id, query),
  }),
});
