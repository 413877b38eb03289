import { newMemberSchema, organisationParams } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { addMember, listMembers } from "../server/organisations/organisations.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The organisation's members and their roles (members only; 404 otherwise)",
    auth: "user",
    params: organisationParams,
    handler: async ({ auth, params }) => ({
      members: await listMembers(params.id, auth.person.id),
    }),
  }),
  POST: endpoint({
    summary: "Add an existing account to the organisation by email, with a role",
    description:
      "Needs the members.manage permission; only an owner adds an owner. 404 when no account has the email, 409 when already a member.",
    auth: "user",
    status: 201,
    params: organisationParams,
    body: newMemberSchema,
    handler: ({ auth, params, body }) => addMember(params.id, auth.person.id, body),
  }),
});
