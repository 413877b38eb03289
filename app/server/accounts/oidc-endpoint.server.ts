import { OAuth2RequestError } from "remix-auth-oauth2";
import { endpoint } from "../api.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { runSignInFlow, type SignInFlow, signInFailure } from "./oauth-endpoint.server.ts";
import { OIDC_PATH, oidcStrategy } from "./oidc.server.ts";
import { IdTokenError } from "./oidc-id-token.server.ts";

// The two legs of the install-wide OpenID Connect sign-in (docs/decisions/0205): the start,
// GET /api/auth/oidc, and the redirect URI, GET /api/auth/oidc/callback. Unlike OAuth's one
// URL each leg does one thing, so a stray `state` never completes a flow from the start URL and
// a callback without one never starts a new flow.

/** Where a failed callback sends the browser: /signin?error=<this>, which the page explains. */
export function oidcFailureReason(error: unknown): string {
  if (error instanceof IdTokenError) return "oidc_token";
  if (error instanceof OAuth2RequestError) {
    return error.code === "access_denied" ? "oidc_denied" : "oidc_failed";
  }
  // remix-auth-oauth2: no state cookie, or a `state` that is not this browser's.
  if (error instanceof RangeError) return "oidc_state";
  if (error instanceof ReferenceError && /state/i.test(error.message)) return "oidc_state";
  if (error instanceof DomainError && error.status === 403) return "oidc_unverified";
  if (error instanceof DomainError && error.status === 409) return "oidc_conflict";
  return "oidc_failed";
}

const flow: SignInFlow = {
  provider: "oidc",
  strategy: oidcStrategy,
  failureReason: oidcFailureReason,
};

export const oidcStart = endpoint({
  summary: "Sign in with the install's OpenID Connect provider",
  description:
    "302 to the provider's authorization endpoint (from discovery) with state, nonce and a PKCE S256 challenge; the state lives in a 5-minute httpOnly cookie. 503 when OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET are not set.",
  auth: "none",
  handler: ({ request, ip }) =>
    // Query parameters are ignored: this leg only starts a flow.
    runSignInFlow(
      flow,
      new Request(new URL(OIDC_PATH, request.url), { headers: request.headers }),
      ip,
    ),
});

export const oidcCallback = endpoint({
  summary: "OpenID Connect sign-in: the redirect URI",
  description:
    "The provider's redirect back with `code` and `state`. Checks the state against the cookie, exchanges the code with the PKCE verifier, checks the ID token (signature against the provider's keys, iss, aud, exp, iat, nonce), then signs in: the identity's account, else the account with the same verified email (linked), else a new one; 302 to /settings. Failures 302 to /signin?error=oidc_state|oidc_token|oidc_unverified|oidc_denied|oidc_conflict|oidc_failed, without a session.",
  auth: "none",
  handler: async ({ request, ip }) => {
    if (!new URL(request.url).searchParams.get("state")) {
      await oidcStrategy(); // 503 when not configured, like the start
      return signInFailure(request, flow, "oidc_state");
    }
    return runSignInFlow(flow, request, ip);
  },
});
