import { agentVerificationChallenge } from "../server/agents/agent-verification.server.ts";
import { agentParams } from "../server/agents/agents.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "A challenge to sign for an exchange, ens or webauthn verification",
    description: "Valid for 10 minutes, usable once.",
    auth: "user",
    permission: "agents.configure",
    rateLimit: "agents",
    params: agentParams,
    handler: ({ auth, params }) => agentVerificationChallenge(auth.user.id, params.id),
  }),
});
