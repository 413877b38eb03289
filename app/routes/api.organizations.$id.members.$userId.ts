import { memberParams, memberRoleSchema } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { changeRole, removeMember } from "../server/organisations/organisations.server.ts";

export const { loader, action } = apiRoute({
  PATCH: endpoint({
    summary: "Change a member's role",
    description:
      "Needs the members.manage permission; only an owner makes or unmakes an owner, and an organisation keeps at least one owner (409).",
    auth: "user",
    params: memberParams,
    body: memberRoleSchema,
    handler: async ({ auth, params, body }) => {
      await changeRole(params.id, auth.person.id, params.userId, body.role);
      return { success: true };
    },
  }),
  DELETE: endpoint({
    summary: "Remove a member: their access through the organisation ends at once",
    description:
      "Needs the members.manage permission; their open sockets and streams on the organisation's agents close within a second.",
    auth: "user",
    params: memberParams,
    handler: async ({ auth, params }) => {
      await removeMember(params.id, auth.person.id, params.userId);
      return { success: true };
    },
  }),
});
