import { apiRoute, endpoint } from "../server/api.server.ts";
import { checkHealth } from "../server/platform/health.server.ts";
import { jsonWithStatus } from "../server/platform/http.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Health of the web tier, its database and its job queue",
    auth: "none",
    handler: async () => {
      const health = await checkHealth();
      return jsonWithStatus(health.status === "ok" ? 200 : 503, health);
    },
  }),
});
