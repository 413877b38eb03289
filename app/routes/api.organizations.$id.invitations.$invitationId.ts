import { invitationParams } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { revokeInvitation } from "../server/organisations/invitations.server.ts";

export const { loader, action } = apiRoute({
  DELETE: endpoint({
    summary: "Revoke a pending invitation: its link stops working at once",
    description:
      "Needs the members.manage permission; only an owner revokes an invitation to be an owner. 409 when it was already accepted or revoked.",
    auth: "user",
    params: invitationParams,
    handler: async ({ auth, params }) => {
      await revokeInvitation(params.id, auth.person.id, params.invitationId);
      return { success: true };
    },
  }),
});
