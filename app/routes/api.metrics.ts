import { apiRoute, endpoint } from "../server/api.server.ts";
import { readPlatformMetrics } from "../server/metrics/platform.server.ts";
import { json } from "../server/platform/http.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Platform-wide metrics (public; aggregates only)",
    description:
      "Counts of users, agents and instances, and the last 24 hours' activity (messages, AI calls, tokens, latency, error rate), withheld while fewer than 5 users were active. Recomputed at most every 10 seconds; 60 per minute per IP.",
    auth: "none",
    rateLimit: "metrics",
    handler: async () =>
      json(await readPlatformMetrics(), { headers: { "Cache-Control": "public, max-age=10" } }),
  }),
});
