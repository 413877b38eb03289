import { liveCredentialOf } from "../server/accounts/credential-watch.server.ts";
import { agentParams } from "../server/agents/agents.server.ts";
import { progressEvents } from "../server/agents/progress-events.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader } = apiRoute({
  GET: endpoint({
    summary: "The agent's start-up progress as server-sent events",
    description:
      '`text/event-stream`: a `progress` event (status, action, step, steps with their times, estimate) at once and at every change while the agent is provisioned, started, restarted, updated, repaired or woken, then `done` and the stream ends. At most 5 open streams per user and web process (`PROGRESS_STREAMS_PER_USER`); another answers 429 `{error}`. Another user\'s agent answers 404. When the credential is revoked (sign-out, a revoked session, a deleted key, a password reset, a suspension) an `error` event `{error: "credential revoked"}` ends the stream.',
    auth: "user",
    permission: "agents.read",
    rateLimit: "agents",
    params: agentParams,
    handler: ({ auth, params, request }) =>
      progressEvents(liveCredentialOf(auth), auth.user.id, params.id, request),
  }),
});
