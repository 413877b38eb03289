import { clearSessionCookie, revokeSession } from "../server/accounts/sessions.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { json } from "../server/platform/http.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Sign out: revoke the current session and clear its cookie",
    auth: "optional",
    handler: async ({ auth }) => {
      if (auth?.sessionId) await revokeSession(auth.user.id, auth.sessionId);
      return json({ success: true }, { headers: { "Set-Cookie": await clearSessionCookie() } });
    },
  }),
});
