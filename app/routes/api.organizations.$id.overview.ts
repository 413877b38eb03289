import { organisationParams } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { organisationOverview } from "../server/organisations/overview.server.ts";

// The mission-control view (decision 0207). The organisation is in the path, as for its members.

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary:
      "The organisation at a glance: its agents with status and awake/asleep, its model spend this month, its members and its latest audit entries",
    description:
      "Needs agents.read (every role; 404 for a non-member). spend.costMicroUsd sums the organisation's metered model calls since the start of the UTC month; spend.perMember and spend.perAgent split this month's spend (as GET /api/organizations/:id/spend does) for roles with billing.read, null otherwise. audit is null for a role without audit.read.",
    auth: "user",
    params: organisationParams,
    handler: ({ auth, params }) => organisationOverview(params.id, auth.person.id),
  }),
});
