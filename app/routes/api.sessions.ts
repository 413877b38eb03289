import { listSessions } from "../server/accounts/sessions.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The user's active sessions (signed-in browsers)",
    auth: "user",
    handler: async ({ auth }) => ({ sessions: await listSessions(auth.user.id, auth.sessionId) }),
  }),
});
