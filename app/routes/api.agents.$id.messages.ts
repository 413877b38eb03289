import { agentMessages, messagesQuery } from "../server/agents/agent-messages.server.ts";
import { agentParams } from "../server/agents/agents.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The agent's recorded messages, newest first",
    auth: "user",
    permission: "agents.read",
    rateLimit: "agents",
    params: agentParams,
    query: messagesQuery,
    handler: ({ auth, params, query }) => agentMessages(auth.user.id, params.id, query),
  }),
});
