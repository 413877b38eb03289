import { acceptInvitationSchema } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { acceptInvitation } from "../server/organisations/invitations.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Accept an invitation into an organisation as the signed-in person",
    description:
      "Session only (an API key cannot join its owner to an organisation). The signed-in account's email must be the invited one (403 otherwise, case-insensitive). 404 for an unknown token; 410 when the invitation was used, revoked or expired; 409 when already a member; 402 when the organisation's seats are all taken. A new account joins by registering (POST /api/register) with invitationToken.",
    auth: "session",
    body: acceptInvitationSchema,
    handler: async ({ auth, body }) => acceptInvitation(body.token, auth.person),
  }),
});
