import { z } from "zod";
import { revokeSession } from "../server/accounts/sessions.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";

export const { loader, action } = apiRoute({
  DELETE: endpoint({
    summary: "Revoke one of the user's sessions (sign that browser out)",
    auth: "user",
    params: z.object({ id: z.string().max(64) }),
    handler: async ({ auth, params }) => {
      if (!(await revokeSession(auth.user.id, params.id))) {
        throw new DomainError(404, "Session not found");
      }
      return { success: true };
    },
  }),
});
