import { changePasswordSchema } from "../schemas/accounts.ts";
import { changePassword } from "../server/accounts/users.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Change the password",
    description: "Session only. The current password is required; every other session is revoked.",
    auth: "session",
    body: changePasswordSchema,
    handler: async ({ auth, body }) => {
      await changePassword(auth.user.id, body.currentPassword, body.newPassword, auth.sessionId);
      return { success: true };
    },
  }),
});
