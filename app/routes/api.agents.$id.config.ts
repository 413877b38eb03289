import {
  agentConfigBody,
  readAgentConfig,
  updateAgentConfig,
} from "../server/agents/agent-config.server.ts";
import { agentParams } from "../server/agents/agents.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The agent's stored configuration",
    auth: "user",
    permission: "agents.read",
    rateLimit: "agents",
    params: agentParams,
    handler: ({ auth, params }) => readAgentConfig(auth.user.id, params.id),
  }),
  PUT: endpoint({
    summary: "Replace the agent's configuration",
    description:
      "Any JSON object up to 64 KiB, stored as a new revision; its allow-listed keys are applied to the running gateway (`applied` tells whether that happened within a few seconds).",
    auth: "user",
    permission: "agents.configure",
    rateLimit: "agents",
    params: agentParams,
    body: agentConfigBody,
    handler: ({ auth, params, body }) => updateAgentConfig(auth.user.id, params.id, body),
  }),
});
