import { frontendModels } from "../server/ai/models.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Models for the frontend: <vendor>/<model> ids, context length, USD prices per token",
    description: "500 when the providers' listings fail or are invalid and nothing is cached.",
    auth: "none",
    handler: async () => ({ models: await frontendModels() }),
  }),
});
