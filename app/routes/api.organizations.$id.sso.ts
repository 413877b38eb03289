import { organisationParams } from "../schemas/organisations.ts";
import { ssoConnectionSchema } from "../schemas/sso.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import {
  removeSsoConnection,
  setSsoConnection,
  ssoSettingsOf,
} from "../server/sso/connections.server.ts";

// An organisation's single sign-on connection (decision 0210): members.manage (owners, admins).

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The organisation's SSO connection and the URLs its identity provider needs",
    description:
      "Needs members.manage (404 for a non-member, 403 for another role). `connection` is null when none is set; the OIDC client secret is never shown (`clientSecretSet`). `serviceProvider` gives the OIDC redirect URI and the SAML entity id, metadata and ACS URLs.",
    auth: "user",
    params: organisationParams,
    handler: async ({ auth, params }) => ({ sso: await ssoSettingsOf(params.id, auth.person.id) }),
  }),
  PUT: endpoint({
    summary: "Set the organisation's SSO connection (OpenID Connect or SAML 2.0)",
    description:
      "Needs members.manage. OIDC: issuer, clientId, clientSecret (sealed at rest; may be left out to keep the current one for the same issuer and client). SAML: metadataXml, or idpEntityId, ssoUrl and certificate. Both: slug (what people type at sign-in; 409 when another organisation has it), enabled, groupsAttribute, groupRoles {group: admin|member|viewer|billing}, defaultRole (member unless set). Audited (sso.configured).",
    auth: "user",
    params: organisationParams,
    body: ssoConnectionSchema,
    handler: async ({ auth, params, body }) => ({
      sso: await setSsoConnection(params.id, auth.person.id, body),
    }),
  }),
  DELETE: endpoint({
    summary: "Remove the organisation's SSO connection",
    description:
      "Needs members.manage; 404 when there is none. Accounts made through it stay, with their memberships. Audited (sso.removed).",
    auth: "user",
    params: organisationParams,
    handler: async ({ auth, params }) => {
      await removeSsoConnection(params.id, auth.person.id);
      return { success: true };
    },
  }),
});
