import { agentDetail } from "../server/agents/agent-views.server.ts";
import { agentParams } from "../server/agents/agents.server.ts";
import { deleteAgent } from "../server/agents/delete-agent.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "One agent: status, instance facts and verification",
    auth: "user",
    permission: "agents.read",
    rateLimit: "agents",
    params: agentParams,
    handler: ({ auth, params }) => agentDetail(auth.user.id, params.id),
  }),
  DELETE: endpoint({
    summary: "Delete an agent",
    description:
      "Frees its tier slot and removes it from the gateway. Deleting the user's last agent also removes the gateway: container and state volume (by the worker), channel credentials and model-endpoint tokens. Another user's agent answers 404.",
    auth: "user",
    permission: "agents.provision",
    rateLimit: "agents",
    params: agentParams,
    handler: ({ auth, params }) => deleteAgent(auth.user.id, params.id),
  }),
});
