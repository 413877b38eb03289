import { domainParams, domainSsoSchema } from "../schemas/domains.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { removeDomain, setRequireSso } from "../server/organisations/domains.server.ts";

export const { loader, action } = apiRoute({
  PATCH: endpoint({
    summary: "Require single sign-on for the people of a verified domain, or stop requiring it",
    description:
      "Needs the members.manage permission; 409 for a domain not verified yet. Owners keep a break-glass password sign-in (audited).",
    auth: "user",
    params: domainParams,
    body: domainSsoSchema,
    handler: ({ auth, params, body }) =>
      setRequireSso(params.id, auth.person.id, params.domainId, body.requireSso),
  }),
  DELETE: endpoint({
    summary: "Remove a domain (and the single sign-on requirement for it)",
    auth: "user",
    params: domainParams,
    handler: async ({ auth, params }) => {
      await removeDomain(params.id, auth.person.id, params.domainId);
      return { success: true };
    },
  }),
});
