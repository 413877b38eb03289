import { signSessionJwt } from "../server/accounts/session-jwt.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The signed-in session as a Bearer JWT for the billing endpoints (15 minutes)",
    description: "Valid only while the session it comes from is active.",
    auth: "session",
    handler: ({ auth }) => signSessionJwt(auth.user.id, auth.sessionId!),
  }),
});
