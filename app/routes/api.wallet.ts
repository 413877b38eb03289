import { z } from "zod";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { sendFromWallet, sendSchema } from "../server/payments/wallet-sends.server.ts";
import { createWalletAnswer, walletInfo } from "../server/payments/wallets.server.ts";

// The caller's hosted wallet: docs/decisions/0125-hosted-wallets.md, 0173-wallet-send.md

const info =
  "`{wallet: {address, driver, chainId, createdAt, balances: {native: {symbol, decimals, amount}, token: {address, symbol, decimals, amount}}}}`; amounts are integers in the smallest unit, as strings. 404 when the user has no hosted wallet; 502 when the chain cannot be read.";

const send =
  '`{action: "send", asset: "native" | "token", to, amount, idempotencyKey}` sends `amount` (integer string in the asset\'s smallest unit: wei, or the configured token\'s units) from your hosted wallet to `to`, once per `idempotencyKey` (1–64 of `[A-Za-z0-9._-]`, yours to choose): → `{send: {id, asset, token, to, amount, status (confirmed|pending|failed), hash, attempts: [{attempt, from, to, amount, status, hash, blockNumber, error}], createdAt}}`. The same key again answers the recorded send (a pending one reconciled with the chain, a failed one retried); with another asset, address or amount it is 409. 400 when the wallet lacks the amount or the gas (nothing is recorded or sent), or `to` is the wallet itself; 502 with `send` when the chain refused the transfer.';

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Your hosted wallet and its balances",
    description: info,
    auth: "user",
    rateLimit: "payments",
    handler: ({ auth }) => walletInfo(auth.user.id),
  }),
  POST: endpoint({
    summary: "Wallet actions: create, info, send",
    description: `\`{action: "create"}\` makes your hosted wallet (201; a second create answers 200 with the same wallet and \`created: false\`). \`{action: "info"}\` answers like GET: ${info} ${send}`,
    auth: "user",
    rateLimit: "payments",
    body: z.discriminatedUnion("action", [
      z.object({ action: z.literal("create") }).strict(),
      z.object({ action: z.literal("info") }).strict(),
      sendSchema,
    ]),
    handler: async ({ auth, body }) => {
      if (body.action === "create") return createWalletAnswer(auth.user.id);
      if (body.action === "info") return walletInfo(auth.user.id);
      const { action: _, ...input } = body;
      return sendFromWallet(auth.user.id, input);
    },
  }),
});
