import { z } from "zod";
import { organisationParams } from "../../schemas/organisations.ts";
import { ssoLookupSchema } from "../../schemas/sso.ts";
import { runSignInFlow, signInFailure } from "../accounts/oauth-endpoint.server.ts";
import { createSession } from "../accounts/sessions.server.ts";
import { endpoint } from "../api.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { safeRedirect } from "../platform/safe-redirect.server.ts";
import { connectionOf, type SsoConnection, ssoConnectionFor } from "./connections.server.ts";
import { ssoFailureReason, ssoOidcFlow, ssoOidcPath } from "./oidc-flow.server.ts";
import { samlMetadata, samlSignIn, samlSignInUrl } from "./saml.server.ts";
import { SsoRefused } from "./sign-in.server.ts";

// Signing in through an organisation's connection (decisions 0210, 0211). Every failure in a
// browser's flow lands on /signin?error=<reason>, which the page explains: never a stack or a 500.

const redirect = (location: string, cookies: string[] = []) => {
  const headers = new Headers({ Location: location, "Cache-Control": "no-store" });
  for (const c of cookies) headers.append("Set-Cookie", c);
  return new Response(null, { status: 302, headers });
};

const failed = (reason: string) => redirect(`/signin?error=${reason}`);

async function enabledConnection(organisationId: string): Promise<SsoConnection | undefined> {
  const c = await connectionOf(organisationId);
  return c?.enabled ? c : undefined;
}

export const ssoLookup = endpoint({
  summary: "Sign in with an organisation's SSO: find its connection",
  description:
    "The sign-in page's form: `org` is the organisation's SSO slug, or a work email whose domain the organisation verified. 302 to /api/auth/sso/<organisation id>, or to /signin?error=sso_unknown when no enabled connection answers it.",
  auth: "none",
  rateLimit: "sso",
  query: ssoLookupSchema,
  handler: async ({ query }) => {
    const org = query.org.trim();
    const c = await ssoConnectionFor(org.includes("@") ? { email: org } : { slug: org });
    return c ? redirect(`/api/auth/sso/${c.organisationId}`) : failed("sso_unknown");
  },
});

export const ssoStart = endpoint({
  summary: "Start signing in through an organisation's SSO connection",
  description:
    "OIDC: 302 to the provider (state, nonce, PKCE S256; the state in a 5-minute cookie at /api/auth/sso/<id>/oidc). SAML: 302 to the IdP's SSO URL with an AuthnRequest (HTTP-Redirect) and RelayState. No enabled connection: 302 to /signin?error=sso_unknown.",
  auth: "none",
  params: organisationParams,
  handler: async ({ request, params, ip }) => {
    const c = await enabledConnection(params.id);
    if (!c) return failed("sso_unknown");
    if (c.protocol === "saml") {
      try {
        return redirect(await samlSignInUrl(c, `/organizations/${c.organisationId}`));
      } catch (error) {
        logger().warn({ err: error, organisation: c.organisationId }, "SAML start failed");
        return failed("sso_failed");
      }
    }
    const start = new Request(new URL(ssoOidcPath(c.organisationId), request.url), {
      headers: request.headers,
    });
    return runSignInFlow(ssoOidcFlow(c), start, ip).catch((error: unknown) => {
      if (error instanceof Response) throw error;
      logger().warn({ err: error, organisation: c.organisationId }, "SSO OIDC start failed");
      return failed("sso_failed");
    });
  },
});

export const ssoOidcCallback = endpoint({
  summary: "An organisation's OpenID Connect redirect URI",
  description:
    "The provider's redirect back with `code` and `state`, checked as the install-wide callback checks them; then the account (made on first sign-in) is signed in and made a member of the organisation with the role its groups map to; 302 to the organisation's page. Failures 302 to /signin?error=…",
  auth: "none",
  params: organisationParams,
  handler: async ({ request, params, ip }) => {
    const c = await enabledConnection(params.id);
    if (c?.protocol !== "oidc") return failed("sso_unknown");
    const flow = ssoOidcFlow(c);
    if (!new URL(request.url).searchParams.get("state")) {
      return signInFailure(request, flow, "oidc_state");
    }
    return runSignInFlow(flow, request, ip);
  },
});

export const ssoSamlMetadata = endpoint({
  summary: "An organisation's SAML service provider metadata",
  description:
    "XML (SAML 2.0 metadata): entity id (this URL), the ACS URL (HTTP-POST), signed assertions wanted. 404 when the organisation has no SAML connection.",
  auth: "none",
  params: organisationParams,
  handler: async ({ params }) => {
    const c = await connectionOf(params.id);
    if (c?.protocol !== "saml") {
      return Response.json({ error: "This organisation has no SAML connection" }, { status: 404 });
    }
    return new Response(samlMetadata(c), {
      headers: { "content-type": "application/samlmetadata+xml; charset=utf-8" },
    });
  },
});

const acsBody = z.object({
  SAMLResponse: z.string().min(1).max(1_000_000),
  RelayState: z.string().max(2000).optional(),
});

export const ssoSamlAcs = endpoint({
  summary: "An organisation's SAML assertion consumer service (HTTP-POST)",
  description:
    "The IdP's POSTed SAMLResponse (SP- or IdP-initiated). Needs a valid signature over the assertion (its own or the response's), our audience, our ACS as Recipient and Destination, NotBefore/NotOnOrAfter within 60 s of skew, InResponseTo one of our open requests when present, and an assertion id not seen before. Then signs in (the account made on first sign-in, a member with the mapped role) and 302s to RelayState (a local path) or the organisation's page. Refusals 302 to /signin?error=saml_signature|saml_audience|saml_expired|saml_replay|saml_request|saml_invalid|sso_conflict|sso_domain|sso_no_email|sso_seats.",
  auth: "none",
  rateLimit: "sso",
  params: organisationParams,
  body: acsBody,
  handler: async ({ request, params, body, ip }) => {
    const c = await enabledConnection(params.id);
    if (c?.protocol !== "saml") return failed("sso_unknown");
    let userId: string;
    try {
      userId = (await samlSignIn(c, body.SAMLResponse)).id;
    } catch (error) {
      if (error instanceof SsoRefused || (error instanceof DomainError && error.status === 402)) {
        logger().info({ err: error, organisation: c.organisationId }, "SAML sign-in refused");
        return failed(ssoFailureReason(error));
      }
      logger().error({ err: error, organisation: c.organisationId }, "SAML sign-in failed");
      return failed("sso_failed");
    }
    const session = await createSession(userId, {
      ip,
      userAgent: request.headers.get("user-agent") ?? undefined,
    });
    const landing = safeRedirect(body.RelayState, `/organizations/${c.organisationId}`);
    return redirect(landing, [session.setCookie]);
  },
});
