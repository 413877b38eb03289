import { registerSchema } from "../schemas/accounts.ts";
import { assertNotBot } from "../server/accounts/bot.server.ts";
import { createUser } from "../server/accounts/users.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Register with email and password",
    description:
      "Bot detection (403) and a per-IP limit (429) apply. A referral code naming an existing user credits both users once. Emits user.created.",
    auth: "none",
    rateLimit: "register",
    status: 201,
    body: registerSchema,
    handler: async ({ request, body }) => {
      assertNotBot(request, body.website);
      const user = await createUser(body);
      return { id: user.id, email: user.email, name: user.name };
    },
  }),
});
