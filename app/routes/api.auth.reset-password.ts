import { resetPasswordSchema } from "../schemas/accounts.ts";
import { RESET_DONE_MESSAGE, resetPassword } from "../server/accounts/password-reset.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Set a new password with the token from the reset email",
    description: "The token works once and expires after an hour; every session is revoked.",
    auth: "none",
    rateLimit: "reset-password",
    body: resetPasswordSchema,
    handler: async ({ body }) => {
      await resetPassword(body.token, body.password);
      return { message: RESET_DONE_MESSAGE };
    },
  }),
});
