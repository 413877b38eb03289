import { brandingSchema, organisationParams } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { brandingOf, setBranding } from "../server/organisations/branding.server.ts";

// White-label branding (decision 0207). The organisation is in the path, as for its members.

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The organisation's white-label branding and whether its plan includes it",
    description: "Members only (404 otherwise).",
    auth: "user",
    params: organisationParams,
    handler: async ({ auth, params }) => ({
      branding: await brandingOf(params.id, auth.person.id),
    }),
  }),
  PATCH: endpoint({
    summary: "Set the display name, logo URL (https) and sender name of the organisation's emails",
    description:
      "Needs the members.manage permission. Only the fields given change; null clears one. On a plan without white-label emails (label and network have them): 402 naming the plans. Invitations and every email to the organisation's members about it carry the branding: the sender name as the From name (the address is unchanged), the display name and logo in the text.",
    auth: "user",
    params: organisationParams,
    body: brandingSchema,
    handler: async ({ auth, params, body }) => ({
      branding: await setBranding(params.id, auth.person.id, body),
    }),
  }),
});
