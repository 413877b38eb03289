import { endpoint } from "../api.server.ts";
import { logger } from "../platform/logger.server.ts";
import {
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

/** Expires the state cookies of this provider's flow (one per started attempt). */
function clearStateCookies(request: Request, provider: OAuthProvider): string[] {
  const prefix = stateCookieName(provider);
  return (request.headers.get("cookie") ?? "")
    .split(";")
    .map((c) => c.trim().split("=")[0] ?? "")
    .filter((name) => name.startsWith(prefix))
    .map((name) => `${name}=; Path=/api/auth/${provider}; Max-Age=0; HttpOnly; SameSite=Lax`);
}

/** GET /api/auth/<provider>: starts the flow, or (with `state`) completes it. */
export const oauthEndpoint = (provider: OAuthProvider) =>
  endpoint({
    summary: `Sign in with ${provider} (${providerLabels[provider]})`,
    description:
      "Without `state`: 302 to the provider (state + PKCE S256). With `code` and `state`: the callback; signs in (linking an existing user with the same verified email) and 302s to /settings, or to /signin?error=… on a denied consent or failure. 503 when the provider is not configured.",
    auth: "none",
    handler: async ({ request, ip }) => {
      const strategy = oauthStrategy(provider);
      let user: Awaited<ReturnType<typeof strategy.authenticate>>;
      try {
        user = await strategy.authenticate(request);
      } catch (error) {
        if (error instanceof Response) throw error; // the redirect to the provider
        logger().info({ err: error, provider }, "OAuth sign-in failed");
        return redirect(
          `/signin?error=${oauthFailureReason(error)}`,
          clearStateCookies(request, provider),
        );
      }
      const session = await createSession(user.id, {
        ip,
        userAgent: request.headers.get("user-agent") ?? undefined,
      });
      return redirect("/settings", [session.setCookie, ...clearStateCookies(request, provider)]);
    },
  });
