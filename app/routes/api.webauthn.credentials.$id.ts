import { z } from "zod";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { removeWebauthnCredential } from "../server/identity/webauthn.server.ts";

export const { loader, action } = apiRoute({
  DELETE: endpoint({
    summary: "Remove one of the user's security keys (404 when it is not theirs)",
    auth: "session",
    params: z.object({ id: z.string().min(1).max(1024) }),
    handler: async ({ auth, params }) => {
      await removeWebauthnCredential(auth.user.id, params.id);
      return { success: true };
    },
  }),
});
