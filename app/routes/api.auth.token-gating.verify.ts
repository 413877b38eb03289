import { z } from "zod";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { addressSchema } from "../server/identity/addresses.server.ts";
import { checkTokenGating } from "../server/identity/token-gating.server.ts";

const fidSchema = z.union([
  z.string().trim().min(1, "is required"),
  z
    .number()
    .int()
    .nonnegative()
    .transform((n) => String(n)),
]);

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Check an identity-network user's address against the gating token",
    description:
      "ERC-20 balanceOf of the gating token on the configured chain, compared with minBalance (smallest unit). 400 for a missing fid/address or an invalid address; 500 when the chain cannot be read.",
    auth: "none",
    rateLimit: "identity",
    body: z.object({ fid: fidSchema, address: addressSchema }),
    handler: async ({ body }) => {
      const check = await checkTokenGating(body.address);
      return {
        fid: body.fid,
        address: check.address,
        hasAccess: check.hasAccess,
        tokenGated: check.tokenGated,
        minBalance: check.minBalance,
        token: check.token,
        chain: check.chain,
        message: !check.tokenGated
          ? "Token gating is not enabled"
          : check.hasAccess
            ? `Access granted: holds at least ${check.minBalance} ${check.token}`
            : `Access denied: holds less than ${check.minBalance} ${check.token}`,
        timestamp: new Date().toISOString(),
      };
    },
  }),
  GET: endpoint({
    summary: "Check an address against the gating token",
    description:
      "Same check as POST, without fid; shows the token contract and the (key-free) RPC endpoint. 400 for an invalid address; 500 when the chain cannot be read.",
    auth: "none",
    rateLimit: "identity",
    query: z.object({ address: addressSchema }),
    handler: async ({ query }) => {
      const check = await checkTokenGating(query.address);
      return {
        address: check.address,
        hasAccess: check.hasAccess,
        tokenGated: check.tokenGated,
        minBalance: check.minBalance,
        token: check.token,
        chain: check.chain,
        contractAddress: check.contractAddress,
        rpcEndpoint: check.rpcEndpoint,
      };
    },
  }),
});
