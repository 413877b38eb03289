import { apiRoute, endpoint } from "../server/api.server.ts";
import { recentCredits } from "../server/billing/account.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Credit balance (1 credit = 1 USD) and the 20 latest ledger entries",
    auth: "jwt",
    permission: "billing.read",
    handler: ({ auth }) => recentCredits(auth.user.id),
  }),
});
