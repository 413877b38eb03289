import { z } from "zod";
import { deleteApiKey, getApiKey } from "../server/accounts/api-keys.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

const params = z.object({ id: z.string().max(64) });

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "One of the user's API keys",
    auth: "user",
    params,
    handler: ({ auth, params }) => getApiKey(auth.user.id, params.id),
  }),
  DELETE: endpoint({
    summary: "Delete an API key (it stops working at once)",
    description: "Session only: an API key cannot delete keys.",
    auth: "session",
    params,
    handler: async ({ auth, params }) => {
      await deleteApiKey(auth.user.id, params.id);
      return { success: true };
    },
  }),
});
