import { domainParams } from "../schemas/domains.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { verifyDomain } from "../server/organisations/domains.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Look up the domain's TXT record now and mark the domain verified when it is there",
    description:
      "Needs the members.manage permission. 422 while the record is missing or different, 409 when another organisation holds the domain verified, 502 when DNS cannot be asked.",
    auth: "user",
    rateLimit: "organisation-domain-verify",
    params: domainParams,
    handler: ({ auth, params }) => verifyDomain(params.id, auth.person.id, params.domainId),
  }),
});
