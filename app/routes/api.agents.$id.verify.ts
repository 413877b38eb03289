import {
  readAgentVerification,
  removeAgentVerification,
  submitAgentVerification,
  verifyBody,
} from "../server/agents/agent-verification.server.ts";
import { agentParams } from "../server/agents/agents.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The agent's verification record",
    auth: "user",
    permission: "agents.read",
    rateLimit: "agents",
    params: agentParams,
    handler: ({ auth, params }) => readAgentVerification(auth.user.id, params.id),
  }),
  POST: endpoint({
    summary: "Verify the agent (eas, exchange, ens or webauthn proof)",
    description:
      "exchange, ens and webauthn sign a challenge from POST /api/agents/:id/verify/challenge. 400 when the proof does not check.",
    auth: "user",
    permission: "agents.configure",
    rateLimit: "agents",
    params: agentParams,
    body: verifyBody,
    handler: ({ auth, params, body }) => submitAgentVerification(auth.user.id, params.id, body),
  }),
  DELETE: endpoint({
    summary: "Remove the agent's verification",
    auth: "user",
    permission: "agents.configure",
    rateLimit: "agents",
    params: agentParams,
    handler: ({ auth, params }) => removeAgentVerification(auth.user.id, params.id),
  }),
});
