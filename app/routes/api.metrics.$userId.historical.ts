import { apiRoute, endpoint } from "../server/api.server.ts";
import { historicalQuery, userHistory } from "../server/metrics/historical.server.ts";
import { metricsParams, ownMetricsUser } from "../server/metrics/shared.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The user's own metrics over time",
    description:
      "Per UTC hour or day: turns received and answered, response time, success rate, AI calls, tokens, cost (USD), latency and error rate; with totals. `period` 24h, 7d (default), 30d or 90d; `interval` hour (up to 7d) or day. Another user's id is 404.",
    auth: "user",
    permission: "agents.read",
    rateLimit: "metrics",
    params: metricsParams,
    query: historicalQuery,
    handler: ({ params, query, auth }) =>
      userHistory(ownMetricsUser(params.userId, auth.user.id), query),
  }),
});
