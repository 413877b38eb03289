import { z } from "zod";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { addressSchema } from "../server/identity/addresses.server.ts";
import { verifyIdnet } from "../server/identity/idnet.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";

// A missing fidToken is 401 (the contract), so the body schema lets it through to the handler.
const body = z
  .object({ fidToken: z.string().optional(), address: addressSchema.optional() })
  .optional();

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Sign in with an identity-network (idnet) token, optionally token-gated",
    description:
      "Verifies the Quick Auth JWT (issuer's key set, audience = APP_URL's host, expiry) and returns a base64 sessionToken valid 24 h. With an address, the gating token's balance must reach minBalance: otherwise 403 with `required` and `minBalance`. 401 for a missing or invalid token, 400 for a malformed address, 500 when the issuer's keys cannot be fetched or the chain cannot be read.",
    auth: "none",
    rateLimit: "identity",
    body,
    handler: async ({ body }) => {
      if (!body?.fidToken) throw new DomainError(401, "fidToken is required");
      const result = await verifyIdnet(body.fidToken, body.address);
      return {
        success: true,
        fid: result.fid,
        sessionToken: result.sessionToken,
        expiresIn: result.expiresIn,
        address: result.address,
        message: result.tokenGated ? "Identity verified; token gating passed" : "Identity verified",
        tokenGated: result.tokenGated,
        accessLevel: result.accessLevel,
      };
    },
  }),
});
