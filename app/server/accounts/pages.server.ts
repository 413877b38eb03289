import { redirect } from "@remix-run/node";
import { addressKey } from "../platform/address-key.server.ts";
import { clientIp } from "../platform/client-ip.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { consume, type RateLimitScope } from "../platform/rate-limit.server.ts";
import { assertSameOrigin } from "./auth.server.ts";
import { type ResolvedSession, resolveSession } from "./sessions.server.ts";

// Helpers for the account pages (Remix loaders and actions). Pages only ever use the session
// cookie: an API key is for programs, not browsers.

/** The signed-in browser's session, if any. */
export const pageSession = (request: Request): Promise<ResolvedSession | undefined> =>
  resolveSession(request);

/** Where sign-in sends people afterwards when the request names nowhere acceptable. */
export const AFTER_SIGN_IN = "/settings";

/** The session, or a redirect to the sign-in page that comes back here afterwards. */
export async function requirePageSession(request: Request): Promise<ResolvedSession> {
  const session = await pageSession(request);
  if (!session) {
    const url = new URL(request.url);
    throw redirect(`/signin?redirectTo=${encodeURIComponent(url.pathname + url.search)}`);
  }
  return session;
}

/** Every page action: refuse cross-site posts (the forms work without JavaScript, so no tokens). */
export function guardAction(request: Request): void {
  try {
    assertSameOrigin(request);
  } catch {
    throw new Response("Cross-site request refused", { status: 403 });
  }
}

/** A per-IP limit for a page action: a 429 DomainError, shown by the form. */
export async function limitByIp(
  request: Request,
  context: { remoteAddress?: string | undefined },
  scope: RateLimitScope,
): Promise<void> {
  const decision = await consume(scope, addressKey(clientIp(request, context.remoteAddress)));
  if (decision.allowed) return;
  throw new DomainError(
    429,
    `Too many attempts; try again in ${decision.headers["Retry-After"] ?? "a few"} seconds`,
  );
}

// `access` of the page-action helper (app/server/platform/form-action.server.ts).

/** A page action anyone may post (sign-in, sign-up): same-origin posts only. */
export function anyone({ request }: { request: Request }): undefined {
  guardAction(request);
  return undefined;
}

/** A signed-in page action: same-origin, and a session (else to the sign-in page). */
export async function signedIn({ request }: { request: Request }): Promise<ResolvedSession> {
  guardAction(request);
  return requirePageSession(request);
}
