import { publicUser } from "../server/accounts/model.server.ts";
import { clearSessionCookie } from "../server/accounts/sessions.server.ts";
import { deleteUser } from "../server/accounts/users.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { planOfUser } from "../server/billing/subscriptions.server.ts";
import { json } from "../server/platform/http.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The signed-in user",
    auth: "user",
    description:
      "`plan` is the plan the user has: a subscription's, or the one an operator gives (an assignment or the self-hosted default plan), else `free`.",
    handler: async ({ auth }) => ({
      success: true,
      user: { ...publicUser(auth.user), plan: await planOfUser(auth.user) },
    }),
  }),
  DELETE: endpoint({
    summary: "Delete the account",
    description:
      "Session only (not with an API key). Enqueues the teardown of the user's agents and emits user.deleted.",
    auth: "session",
    handler: async ({ auth }) => {
      await deleteUser(auth.user.id);
      return json({ success: true }, { headers: { "Set-Cookie": await clearSessionCookie() } });
    },
  }),
});
