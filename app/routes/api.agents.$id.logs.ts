import { agentLogs, logsQuery } from "../server/agents/agent-logs.server.ts";
import { agentParams } from "../server/agents/agents.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Recent gateway log entries of the agent",
    description: "From the gateway's file log (logs.tail); 502 when the gateway does not answer.",
    auth: "user",
    permission: "agents.read",
    rateLimit: "agents",
    params: agentParams,
    query: logsQuery,
    handler: ({ auth, params, query }) => agentLogs(auth.user.id, params.id, query),
  }),
});
