import { billingContactSchema, organisationParams } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { syncCustomerEmail } from "../server/billing/checkout.server.ts";
import {
  billingContactOf,
  chooseBillingContact,
} from "../server/organisations/billing-contact.server.ts";
import {
  requireMembership,
  requirePermission,
} from "../server/organisations/organisations.server.ts";
import { db } from "../server/platform/db.server.ts";

// The organisation's billing contact (decision 0215): the email its payment-processor customer
// and invoices carry; its first owner unless chosen.

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The organisation's billing contact (its first owner unless one was chosen)",
    description: "Members only (404 otherwise).",
    auth: "user",
    params: organisationParams,
    handler: async ({ auth, params }) => {
      await requireMembership(params.id, auth.person.id);
      return { contact: (await billingContactOf(params.id)) ?? null };
    },
  }),
  PUT: endpoint({
    summary: "Choose the member who is the organisation's billing contact",
    description:
      "Needs billing.manage (403 otherwise, 404 for a non-member; 404 when userId is not a member). The payment processor's customer takes the contact's email at once.",
    auth: "user",
    params: organisationParams,
    body: billingContactSchema,
    handler: async ({ auth, params, body }) => {
      await requirePermission(params.id, auth.person.id, "billing.manage", db());
      await chooseBillingContact(params.id, body.userId);
      const contact = await billingContactOf(params.id);
      if (contact) await syncCustomerEmail(params.id, contact.email);
      return { contact: contact ?? null };
    },
  }),
});
