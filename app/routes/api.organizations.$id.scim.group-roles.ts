import { organisationParams } from "../schemas/organisations.ts";
import { groupRolesSchema } from "../schemas/scim.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { listGroupRoles, setGroupRoles } from "../server/scim/group-roles.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The SCIM group → role mapping",
    auth: "user",
    params: organisationParams,
    handler: async ({ auth, params }) => ({
      groupRoles: await listGroupRoles(params.id, auth.person.id),
    }),
  }),
  PUT: endpoint({
    summary: "Replace the SCIM group → role mapping; provisioned members' roles follow at once",
    description:
      "Needs the members.manage permission. A group's display name, any case; owner is never mapped.",
    auth: "user",
    params: organisationParams,
    body: groupRolesSchema,
    handler: async ({ auth, params, body }) => ({
      groupRoles: await setGroupRoles(params.id, auth.person.id, body.groupRoles),
    }),
  }),
});
