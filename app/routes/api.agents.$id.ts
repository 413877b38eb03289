import { agentDetail } from "../server/agents/agent-views.server.ts";
import { agentParams } from "../server/agents/agents.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "One agent: status, instance facts and verification",
    auth: "user",
    rateLimit: "agents",
    params: agentParams,
    handler: ({ auth, params }) => agentDetail(auth.user.id, params.id),
  }),
});
