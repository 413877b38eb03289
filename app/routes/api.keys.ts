import { apiKeyNameSchema } from "../schemas/accounts.ts";
import { createApiKey, listApiKeys } from "../server/accounts/api-keys.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "List the user's API keys (without the keys themselves)",
    auth: "user",
    handler: async ({ auth }) => ({ keys: await listApiKeys(auth.user.id) }),
  }),
  POST: endpoint({
    summary: "Create an API key; the full key is in this response only",
    description: "Session only: an API key cannot create keys.",
    auth: "session",
    status: 201,
    body: apiKeyNameSchema,
    handler: ({ auth, body }) => createApiKey(auth.user.id, body.name),
  }),
});
