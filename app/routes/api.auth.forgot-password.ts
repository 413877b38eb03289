import { forgotPasswordSchema } from "../schemas/accounts.ts";
import { assertNotBot } from "../server/accounts/bot.server.ts";
import {
  FORGOT_PASSWORD_MESSAGE,
  requestPasswordReset,
} from "../server/accounts/password-reset.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Email a password reset link",
    description:
      "Answers the same message whether or not the account exists. Bot detection (403) and a per-IP limit (429) apply.",
    auth: "none",
    rateLimit: "forgot-password",
    body: forgotPasswordSchema,
    handler: async ({ request, body }) => {
      assertNotBot(request, body.website);
      await requestPasswordReset(body.email);
      return { message: FORGOT_PASSWORD_MESSAGE };
    },
  }),
});
