import { organisationParams, transferOwnershipSchema } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { transferOwnership } from "../server/organisations/ownership.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Transfer the organisation's ownership to a member; the caller becomes an admin",
    description:
      "Owners only (403 otherwise, 404 for a non-member). 404 when userId is not a member; 402 when a viewer or billing manager made owner finds no free seat. What an only owner does before deleting their account (decision 0214).",
    auth: "user",
    params: organisationParams,
    body: transferOwnershipSchema,
    handler: async ({ auth, params, body }) => {
      await transferOwnership(params.id, auth.person.id, body.userId);
      return { success: true };
    },
  }),
});
