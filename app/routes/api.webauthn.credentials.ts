import { apiRoute, endpoint } from "../server/api.server.ts";
import { listWebauthnCredentials } from "../server/identity/webauthn.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The user's registered security keys and passkeys (no key material)",
    auth: "user",
    handler: async ({ auth }) => ({ credentials: await listWebauthnCredentials(auth.user.id) }),
  }),
});
