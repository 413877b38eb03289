import type { OAuth2Strategy } from "remix-auth-oauth2";
import { endpoint } from "../api.server.ts";
import { logger } from "../platform/logger.server.ts";
import type { User } from "./model.server.ts";
import {
  type LinkProvider,
  type OAuthProvider,
  oauthFailureReason,
  oauthStrategy,
  providerLabels,
  stateCookieName,
} from "./oauth.server.ts";
import { createSession } from "./sessions.server.ts";

const redirect = (location: string, cookies: string[] = []) => {
  const headers = new Headers({ Location: location, "Cache-Control": "no-store" });
  for (const c of cookies) headers.append("Set-Cookie", c);
  return new Response(null, { status: 302, headers });
};

/** Expires the state cookies of this flow (one per started attempt). */
function clearStateCookies(request: Request, flow: SignInFlow): string[] {
  const prefix = flow.stateCookie?.name ?? stateCookieName(flow.provider);
  const path = flow.stateCookie?.path ?? `/api/auth/${flow.provider}`;
  return (request.headers.get("cookie") ?? "")
    .split(";")
    .map((c) => c.trim().split("=")[0] ?? "")
    .filter((name) => name.startsWith(prefix))
    .map((name) => `${name}=; Path=${path}; Max-Age=0; HttpOnly; SameSite=Lax`);
}

/**
 * One sign-in flow of the OAuth kind: OAuth (oauth1, oauth2), the install's OpenID Connect
 * (oidc) or an organisation's (decision 0210: its own cookie, path and landing page).
 */
export interface SignInFlow {
  provider: LinkProvider;
  /** The state cookie's name prefix and path, when not `oauth_<provider>` at /api/auth/<provider>. */
  stateCookie?: { name: string; path: string };
  /** Where a signed-in browser lands (default /settings). */
  landing?: string;
  /** The flow's strategy; throws a DomainError (503) when the provider is not configured. */
  strategy(): OAuth2Strategy<User> | Promise<OAuth2Strategy<User>>;
  /** The `error` the sign-in page explains, for a failed callback. */
  failureReason(error: unknown): string;
}

/**
 * Runs a leg of the flow: without `state` a 302 to the provider (state cookie set), with it the
 * callback: signs in and 302s to /settings, or to /signin?error=… without a session.
 */
export async function runSignInFlow(
  flow: SignInFlow,
  request: Request,
  ip: string | undefined,
): Promise<Response> {
  const strategy = await flow.strategy();
  let user: User;
  try {
    user = await strategy.authenticate(request);
  } catch (error) {
    if (error instanceof Response) throw error; // the redirect to the provider
    logger().info({ err: error, provider: flow.provider }, "OAuth sign-in failed");
    return redirect(`/signin?error=${flow.failureReason(error)}`, clearStateCookies(request, flow));
  }
  const session = await createSession(user.id, {
    ip,
    userAgent: request.headers.get("user-agent") ?? undefined,
  });
  return redirect(flow.landing ?? "/settings", [
    session.setCookie,
    ...clearStateCookies(request, flow),
  ]);
}

/** A failed callback's answer outside the strategy (e.g. a callback without `state`). */
export const signInFailure = (request: Request, flow: SignInFlow, reason: string) =>
  redirect(`/signin?error=${reason}`, clearStateCookies(request, flow));

/** GET /api/auth/<provider>: starts the flow, or (with `state`) completes it. */
export const oauthEndpoint = (provider: OAuthProvider) =>
  endpoint({
    summary: `Sign in with ${provider} (${providerLabels[provider]})`,
    description:
      "Without `state`: 302 to the provider (state + PKCE S256). With `code` and `state`: the callback; signs in (linking an existing user with the same verified email) and 302s to /settings, or to /signin?error=… on a denied consent or failure. 503 when the provider is not configured.",
    auth: "none",
    handler: ({ request, ip }) =>
      runSignInFlow(
        {
          provider,
          strategy: () => oauthStrategy(provider),
          failureReason: oauthFailureReason,
        },
        request,
        ip,
      ),
  });
