import { agentStats } from "../server/agents/agent-stats.server.ts";
import { agentParams } from "../server/agents/agents.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Live figures of the agent's container and its message figures",
    description:
      "`status: ok` with the worker's latest sample; `status: mock` (recorded figures, zeros otherwise) when the instance is not running or has no fresh sample.",
    auth: "user",
    permission: "agents.read",
    rateLimit: "agents",
    params: agentParams,
    handler: ({ auth, params }) => agentStats(auth.user.id, params.id),
  }),
});
