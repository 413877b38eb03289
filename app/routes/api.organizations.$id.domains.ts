import { newDomainSchema } from "../schemas/domains.ts";
import { organisationParams } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { addDomain, listDomains } from "../server/organisations/domains.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The organisation's domains, verified or not, with the TXT record each needs",
    auth: "user",
    params: organisationParams,
    handler: async ({ auth, params }) => ({
      domains: await listDomains(params.id, auth.person.id),
    }),
  }),
  POST: endpoint({
    summary: "Claim a domain: answers the TXT record to publish before verifying it",
    description:
      "Needs the members.manage permission. 409 when this organisation has it already or another organisation holds it verified.",
    auth: "user",
    status: 201,
    params: organisationParams,
    body: newDomainSchema,
    handler: ({ auth, params, body }) => addDomain(params.id, auth.person.id, body.domain),
  }),
});
