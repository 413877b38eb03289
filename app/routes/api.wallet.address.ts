import { apiRoute, endpoint } from "../server/api.server.ts";
import { requireWallet } from "../server/payments/wallets.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Your hosted wallet's address",
    description:
      "`{address, chainId}` (EIP-55 checksummed). 404 when the user has no hosted wallet.",
    auth: "user",
    rateLimit: "payments",
    handler: async ({ auth }) => {
      const { address, chainId } = await requireWallet(auth.user.id);
      return { address, chainId };
    },
  }),
});
