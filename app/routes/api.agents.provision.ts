import {
  provisionAgent,
  provisionedAgents,
  provisionInputSchema,
} from "../server/agents/agent-provisioning.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The user's provisioned agents and the model options",
    auth: "user",
    permission: "agents.read",
    rateLimit: "agents",
    handler: ({ auth }) => provisionedAgents(auth.user.id),
  }),
  POST: endpoint({
    summary: "Provision an agent",
    description:
      "Creates the agent under the tier limit (402 without an active subscription, 429 at the limit), provisions the user's instance when it has none, and writes the agent into the gateway's configuration.",
    auth: "user",
    permission: "agents.provision",
    rateLimit: "agents",
    status: 201,
    body: provisionInputSchema,
    handler: ({ auth, body }) => provisionAgent(auth.user.id, body),
  }),
});
