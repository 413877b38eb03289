import { confirmEmailSchema } from "../schemas/accounts.ts";
import { confirmEmailChange } from "../server/accounts/email-change.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Confirm an email change with the token from the link sent to the new address",
    description:
      "The token works once and expires after 24 hours. 409 when the address was taken meanwhile.",
    auth: "none",
    rateLimit: "email-change",
    body: confirmEmailSchema,
    handler: async ({ body }) => {
      const user = await confirmEmailChange(body.token);
      return { success: true, email: user.email };
    },
  }),
});
