import { apiRoute, endpoint } from "../server/api.server.ts";
import { createWalletAnswer, hostedStatus } from "../server/payments/wallets.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Hosted wallet status",
    description:
      "`{hosted, driver, address, chainId}`: `hosted` is false and `address` null until a wallet is made; `driver` is the hosted-wallet driver (builtin: keys sealed by the platform).",
    auth: "user",
    rateLimit: "payments",
    handler: ({ auth }) => hostedStatus(auth.user.id),
  }),
  POST: endpoint({
    summary: "Create a hosted wallet with the configured driver",
    description:
      "Same as POST /api/wallet/create: `{wallet, created}`, 201 when made, 200 when it existed.",
    auth: "user",
    rateLimit: "payments",
    handler: ({ auth }) => createWalletAnswer(auth.user.id),
  }),
});
