import { agentParams } from "../server/agents/agents.server.ts";
import { cloneAgent, cloneBodySchema } from "../server/agents/clone-agent.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Clone the agent, its state included, into a new agent",
    description:
      "A new agent of the same user with the source's model, tier, configuration, messages and gateway workspace (memory, bootstrap files, workspace skills); name defaults to the source's with ' (copy)'. Counted against the tier limit (402 without an active subscription, 429 at the limit). 201 when cloned; 202 with status 'copying' when the workspace is still being copied after the wait; 409 with why when it could not be copied (no agent is left behind) or the agent has no instance.",
    auth: "user",
    permission: "agents.provision",
    rateLimit: "agents",
    status: 201,
    params: agentParams,
    body: cloneBodySchema,
    handler: ({ auth, params, body }) => cloneAgent(auth.user.id, params.id, body),
  }),
});
