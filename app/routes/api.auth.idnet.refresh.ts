import { z } from "zod";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { refreshIdnetSession } from "../server/identity/idnet.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Refresh an identity-network session token",
    description:
      "Body {refreshToken}: a sessionToken from POST /api/auth/idnet/verify (or an earlier refresh), usable once, up to 7 days after it expired. Returns a new sessionToken valid 86400 s; the old one is revoked. 400 when missing, 401 when unknown, used or too old.",
    auth: "none",
    rateLimit: "identity",
    body: z.object({ refreshToken: z.string().min(1, "is required") }),
    handler: async ({ body }) => {
      const { sessionToken, expiresIn } = await refreshIdnetSession(body.refreshToken);
      return { success: true, sessionToken, expiresIn, message: "Session refreshed" };
    },
  }),
});
