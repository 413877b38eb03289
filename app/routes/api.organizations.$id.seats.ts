import { organisationParams, paidSeatsSchema } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { setPaidSeats } from "../server/billing/seat-purchase.server.ts";
import {
  requireMembership,
  requirePermission,
} from "../server/organisations/organisations.server.ts";
import { seatsOf } from "../server/organisations/seats.server.ts";
import { db } from "../server/platform/db.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The organisation's seats: its limit, where it comes from, and how many are taken",
    description:
      "Members only (404 otherwise). A seat is a member who may use the organisation's agents (owner, admin, member); pending invitations for those roles hold one each. limit null means unlimited; paid is the seats bought through the payment processor (decision 0215).",
    auth: "user",
    params: organisationParams,
    handler: async ({ auth, params }) => {
      await requireMembership(params.id, auth.person.id);
      return { seats: await seatsOf(params.id) };
    },
  }),
  PUT: endpoint({
    summary:
      "Buy or give back extra seats: the seat quantity on the organisation's plan subscription",
    description:
      "Needs billing.manage (owner, admin, billing; 403 otherwise, 404 for a non-member). More seats are billed at once, prorated by the payment processor; fewer stay usable until the paid period ends and the next invoice bills fewer. The seat count follows the processor's answer. 409 without a live plan subscription or in self-hosted mode (operators give seats in /ops), 503 without STRIPE_PRICE_SEAT.",
    auth: "user",
    params: organisationParams,
    body: paidSeatsSchema,
    handler: async ({ auth, params, body }) => {
      await requirePermission(params.id, auth.person.id, "billing.manage", db());
      await setPaidSeats(params.id, body.seats);
      return { seats: await seatsOf(params.id) };
    },
  }),
});
