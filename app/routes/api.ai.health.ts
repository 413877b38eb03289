import { aiHealth } from "../server/ai/health.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { json } from "../server/platform/http.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Reachability of each configured AI provider",
    description: "healthy when all answer, degraded when some do, 503 when none does.",
    auth: "none",
    handler: async () => {
      const health = await aiHealth();
      if (health.status === "unavailable") {
        return json({ error: "No AI provider is reachable", ...health }, { status: 503 });
      }
      return health;
    },
  }),
});
