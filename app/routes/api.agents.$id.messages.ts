import { agentMessages, agentParams, messagesQuery } from "../server/agents/agents-api.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The agent's recorded messages, newest first",
    auth: "user",
    rateLimit: "agents",
    params: agentParams,
    query: messagesQuery,
    handler: ({ auth, params, query }) => agentMessages(auth.user.id, params.id, query),
  }),
});
