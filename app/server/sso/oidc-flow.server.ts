import type { SignInFlow } from "../accounts/oauth-endpoint.server.ts";
import { type OidcConnection, oidcStrategyFor } from "../accounts/oidc.server.ts";
import { oidcFailureReason } from "../accounts/oidc-endpoint.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import type { OidcSso } from "./connections.server.ts";
import { SsoRefused, signInWithSso } from "./sign-in.server.ts";

// An organisation's OpenID Connect sign-in (decision 0210): the install-wide flow's strategy
// (discovery, state, nonce, PKCE, the ID token's checks) over the organisation's connection,
// under /api/auth/sso/<organisation>/oidc with its own state cookie, and the organisation's
// account rules (sign-in.server.ts) instead of the install's linking.

export const ssoOidcPath = (organisationId: string) => `/api/auth/sso/${organisationId}/oidc`;

export function ssoOidcConnection(c: OidcSso): OidcConnection {
  return {
    config: {
      issuer: c.issuer,
      clientId: c.clientId,
      clientSecret: c.clientSecret,
      label: c.slug,
      scopes: ["openid", "email", "profile", ...(c.groupsAttribute === "groups" ? ["groups"] : [])],
      groupsClaim: c.groupsAttribute,
    },
    path: ssoOidcPath(c.organisationId),
    cookieName: `oauth_sso_${c.organisationId}`,
    signIn: (profile) =>
      signInWithSso(c, {
        subject: profile.providerAccountId,
        email: profile.email,
        name: profile.name,
        groups: profile.groups ?? null,
      }),
  };
}

/** The sign-in page's reason for a failed organisation sign-in. */
export function ssoFailureReason(error: unknown): string {
  if (error instanceof SsoRefused) return error.reason;
  // No seat left for the role the groups give (claimSeat's 402).
  if (error instanceof DomainError && error.status === 402) return "sso_seats";
  const oidc = oidcFailureReason(error);
  // The organisation's provider's email needs no verification here (never linked by email).
  return oidc === "oidc_conflict" ? "sso_conflict" : oidc;
}

export function ssoOidcFlow(c: OidcSso): SignInFlow {
  const connection = ssoOidcConnection(c);
  return {
    provider: "oidc",
    strategy: () => oidcStrategyFor(connection),
    failureReason: ssoFailureReason,
    stateCookie: { name: connection.cookieName, path: connection.path },
    landing: `/organizations/${c.organisationId}`,
  };
}
