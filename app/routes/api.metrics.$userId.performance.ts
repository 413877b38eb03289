import { apiRoute, endpoint } from "../server/api.server.ts";
import { userPerformance } from "../server/metrics/performance.server.ts";
import { metricsParams, ownMetricsUser } from "../server/metrics/shared.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Current performance of the user's instance and agents",
    description:
      "The instance's latest live sample (CPU, memory, pids, network, uptime), and the last 24 hours' message figures (overall and per agent) and AI figures (latency p50/p95, error rate). Another user's id is 404.",
    auth: "user",
    permission: "agents.read",
    rateLimit: "metrics",
    params: metricsParams,
    handler: ({ params, auth }) => userPerformance(ownMetricsUser(params.userId, auth.user.id)),
  }),
});
