import { unifiedModels } from "../server/ai/models.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Every model of every configured provider, with per-provider counts",
    auth: "none",
    handler: async () => ({ ...(await unifiedModels()), timestamp: new Date().toISOString() }),
  }),
});
