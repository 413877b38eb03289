import { organisationParams } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { deleteOrganisation } from "../server/organisations/ownership.server.ts";

export const { loader, action } = apiRoute({
  DELETE: endpoint({
    summary: "Delete the organisation with its agents, credits, keys and audit log",
    description:
      "Owners only, by session (not with an API key), as deleting an account. Enqueues the teardown of its agents; recorded in the owner's own audit log (decision 0214).",
    auth: "session",
    params: organisationParams,
    handler: async ({ auth, params }) => {
      await deleteOrganisation(params.id, auth.person.id);
      return { success: true };
    },
  }),
});
