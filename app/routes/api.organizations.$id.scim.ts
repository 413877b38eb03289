import { organisationParams } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { requireMembership } from "../server/organisations/organisations.server.ts";
import { groupRolesOf } from "../server/scim/group-roles.server.ts";
import { scimBase } from "../server/scim/schema.server.ts";
import { createScimToken, revokeScimToken, scimTokenInfo } from "../server/scim/tokens.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The organisation's SCIM set-up: base URL, token (preview only), group → role map",
    auth: "user",
    params: organisationParams,
    handler: async ({ auth, params }) => {
      await requireMembership(params.id, auth.person.id);
      return {
        baseUrl: scimBase(),
        token: await scimTokenInfo(params.id),
        groupRoles: await groupRolesOf(params.id),
      };
    },
  }),
  POST: endpoint({
    summary: "Make (or rotate) the organisation's SCIM bearer token: shown in this answer only",
    description:
      "Needs the members.manage permission and a signed-in session. The previous token stops working at once.",
    auth: "session",
    status: 201,
    params: organisationParams,
    handler: ({ auth, params }) => createScimToken(params.id, auth.person.id),
  }),
  DELETE: endpoint({
    summary: "Revoke the organisation's SCIM token (provisioning stops)",
    auth: "user",
    params: organisationParams,
    handler: async ({ auth, params }) => {
      await revokeScimToken(params.id, auth.person.id);
      return { success: true };
    },
  }),
});
