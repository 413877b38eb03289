import { listAgentsView } from "../server/agents/agents-api.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "List the user's agents",
    auth: "user",
    rateLimit: "agents",
    handler: ({ auth }) => listAgentsView(auth.user.id),
  }),
});
