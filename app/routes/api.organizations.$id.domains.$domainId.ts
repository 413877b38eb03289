import { domainParams, domainSsoSchema } from "../schemas/domains.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { removeDomain } from "../server/organisations/domains.server.ts";
import { requireSsoForDomain } from "../server/sso/connections.server.ts";

export const { loader, action } = apiRoute({
  PATCH: endpoint({
    summary: "Require single sign-on for the people of a verified domain, or stop requiring it",
    description:
      "Needs the members.manage permission; 409 for a domain not verified yet, or while the organisation has no enabled SSO connection (and the install has no OIDC). Owners keep a break-glass password sign-in (audited).",
    auth: "user",
    params: domainParams,
    body: domainSsoSchema,
    handler: ({ auth, params, body }) =>
      requireSsoForDomain(params.id, auth.person.id, params.domainId, body.requireSso),
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
