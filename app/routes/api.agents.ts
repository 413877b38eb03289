import { listAgentsView } from "../server/agents/agent-views.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "List the user's agents",
    auth: "user",
    permission: "agents.read",
    rateLimit: "agents",
    handler: ({ auth }) => listAgentsView(auth.user.id),
  }),
});
