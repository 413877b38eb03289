import { newInvitationSchema, organisationParams } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { inviteMember, listInvitations } from "../server/organisations/invitations.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The organisation's pending invitations (expired ones flagged until revoked)",
    description: "Needs the members.manage permission; 404 for a non-member.",
    auth: "user",
    params: organisationParams,
    handler: async ({ auth, params }) => ({
      invitations: await listInvitations(params.id, auth.person.id),
    }),
  }),
  POST: endpoint({
    summary: "Invite an email address into the organisation with a role",
    description:
      "Needs the members.manage permission; only an owner invites an owner. Mails a single-use link <APP_URL>/invitations/<token> that expires after 7 days; inviting the address again replaces its pending invitation. 409 when the address is already a member's; 402 when the role takes a seat (owner, admin, member) and the organisation's seats are all taken.",
    auth: "user",
    rateLimit: "invitations",
    status: 201,
    params: organisationParams,
    body: newInvitationSchema,
    handler: async ({ auth, params, body }) => ({
      invitation: await inviteMember(params.id, auth.person.id, body),
    }),
  }),
});
