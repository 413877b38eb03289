import { changeEmailSchema } from "../schemas/accounts.ts";
import { requestEmailChange } from "../server/accounts/email-change.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Change the sign-in email",
    description:
      "Session only. currentPassword is required when the account has a password. Sends a confirmation link to newEmail (valid 24 hours, once); the email changes when it is opened, and the old address is told. 409 when another account has it.",
    auth: "session",
    rateLimit: "email-change",
    body: changeEmailSchema,
    status: 202,
    handler: async ({ auth, body }) => {
      const { pendingEmail } = await requestEmailChange(
        auth.user.id,
        body.newEmail,
        body.currentPassword,
      );
      return {
        success: true,
        pendingEmail,
        message: `A confirmation link has been sent to ${pendingEmail}`,
      };
    },
  }),
});
