import { organisationParams } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { requireMembership } from "../server/organisations/organisations.server.ts";
import { seatsOf } from "../server/organisations/seats.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The organisation's seats: its limit, where it comes from, and how many are taken",
    description:
      "Members only (404 otherwise). A seat is a member who may use the organisation's agents (owner, admin, member); pending invitations for those roles hold one each. limit null means unlimited.",
    auth: "user",
    params: organisationParams,
    handler: async ({ auth, params }) => {
      await requireMembership(params.id, auth.person.id);
      return { seats: await seatsOf(params.id) };
    },
  }),
});
