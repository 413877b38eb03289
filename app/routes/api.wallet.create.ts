import { apiRoute, endpoint } from "../server/api.server.ts";
import { createWalletAnswer } from "../server/payments/wallets.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Create your hosted wallet",
    description:
      "`{wallet: {address, driver, chainId, createdAt}, created}`: 201 when this call made it; a second call answers 200 with the same wallet and `created: false`. The private key is never returned.",
    auth: "user",
    rateLimit: "payments",
    handler: ({ auth }) => createWalletAnswer(auth.user.id),
  }),
});
