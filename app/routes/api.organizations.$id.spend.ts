import { organisationParams, spendQuery } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { organisationSpend, spendPeriod } from "../server/organisations/spend.server.ts";

// Spend by member and by agent (decision 0215). The organisation is in the path, as for its
// members and overview.

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary:
      "The organisation's model spend and credits used, by member and by agent, over a period",
    description:
      "Needs billing.read (owner, admin, member, billing; 403 for a viewer, 404 for a non-member). from and to are UTC days (YYYY-MM-DD, both counted; default this UTC month so far; at most 366 days). Amounts are integer micro-USD: costMicroUsd as metered, creditsMicroUsd what the organisation's credits paid. A member or agent of null is spend no person or agent is known for: calls metered before attribution existed, chat-channel messages and heartbeats.",
    auth: "user",
    params: organisationParams,
    query: spendQuery,
    handler: async ({ auth, params, query }) =>
      organisationSpend(params.id, auth.person.id, spendPeriod(query.from, query.to)),
  }),
});
