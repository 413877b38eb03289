import { agentModels } from "../server/ai/agents-endpoint.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "OpenAI-compatible model list for hosted agents (per-instance token)",
    auth: "none",
    handler: ({ request }) => agentModels(request),
  }),
});
