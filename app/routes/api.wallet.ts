import { z } from "zod";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { createWalletAnswer, walletInfo } from "../server/payments/wallets.server.ts";

// The caller's hosted wallet: docs/decisions/0125-hosted-wallets.md

const info =
  "`{wallet: {address, driver, chainId, createdAt, balances: {native: {symbol, decimals, amount}, token: {address, symbol, decimals, amount}}}}`; amounts are integers in the smallest unit, as strings. 404 when the user has no hosted wallet; 502 when the chain cannot be read.";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Your hosted wallet and its balances",
    description: info,
    auth: "user",
    rateLimit: "payments",
    handler: ({ auth }) => walletInfo(auth.user.id),
  }),
  POST: endpoint({
    summary: "Wallet actions: create, info",
    description: `\`{action: "create"}\` makes your hosted wallet (201; a second create answers 200 with the same wallet and \`created: false\`). \`{action: "info"}\` answers like GET: ${info}`,
    auth: "user",
    rateLimit: "payments",
    body: z.object({ action: z.enum(["create", "info"]) }).strict(),
    handler: async ({ auth, body }) =>
      body.action === "create" ? createWalletAnswer(auth.user.id) : walletInfo(auth.user.id),
  }),
});
