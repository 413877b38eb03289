import { apiRoute, endpoint } from "../server/api.server.ts";
import { metricsParams, ownMetricsUser } from "../server/metrics/shared.server.ts";
import { summaryQuery, userSummary } from "../server/metrics/summary.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The user's usage next to the platform's medians",
    description:
      "Over `period` 7d, 30d (default) or 90d: the user's figures and the medians of the platform's active users, withheld below 5 of them. Another user's id is 404.",
    auth: "user",
    permission: "agents.read",
    rateLimit: "metrics",
    params: metricsParams,
    query: summaryQuery,
    handler: ({ params, query, auth }) =>
      userSummary(ownMetricsUser(params.userId, auth.user.id), query),
  }),
});
