import { organisationActing } from "../organisations/acting.server.ts";
import { allows, isPermission, type Role, refuseRole } from "../organisations/roles.server.ts";
import type { AuditActor } from "../platform/audit.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import type { ApiSecurity } from "../platform/openapi.server.ts";
import { isCrossSite, isUnsafeMethod } from "../platform/web/same-origin.server.ts";
import { resolveApiKey } from "./api-keys.server.ts";
import type { User } from "./model.server.ts";
import { looksLikeJwt, verifySessionJwt } from "./session-jwt.server.ts";
import { resolveSession } from "./sessions.server.ts";

// How a request proves who it is. The API route builder goes through `authorize` (bound in
// app/server/api.server.ts). docs/decisions/0014-authentication-modes.md
//
// Auth modes:
//   none      no credential is read
//   optional  a session cookie or API key when present (a bad API key is still 401)
//   user      a session cookie or an API key: every endpoint that takes a session
//   jwt       what `user` takes, plus the session token as a Bearer JWT (the contract's "JWT"
//             of the billing endpoints; docs/decisions/0043-billing-jwt.md)
//   session   a session cookie only: creating/deleting API keys, changing the password,
//             deleting the account — a stolen key must not be able to mint keys or lock the
//             owner out

const userActor = (userId: string): AuditActor => ({ type: "user", id: userId, userId });

export interface Auth {
  /**
   * The owner the request acts for: the signed-in person, or the organisation named by
   * X-Organization (decision 0203). Owner-scoped services take this one's id.
   */
  user: User;
  /** The person behind the credential (`user` itself unless acting for an organisation). */
  person: User;
  /** Acting for an organisation: its id and the person's role there. */
  organisation?: { id: string; role: Role };
  via: "session" | "apiKey" | "jwt";
  sessionId?: string;
  keyId?: string;
  /** A rolled session cookie to send back. */
  setCookie?: string;
  /** The audit log's actor: the API key when one was used, else the user. */
  auditActor: AuditActor;
}

/** What a handler gets as `auth` under each mode: `user`, `jwt`, `session` always have one. */
export interface AuthByMode {
  none: undefined;
  optional: Auth | undefined;
  user: Auth;
  jwt: Auth;
  session: Auth;
}

export type AuthMode = keyof AuthByMode;

/** The modes as GET /api/openapi.json describes them. */
export const authSecurity: ApiSecurity<AuthMode> = {
  schemes: {
    session: { type: "apiKey", in: "cookie", name: "__session" },
    apiKey: { type: "http", scheme: "bearer", description: "sk_… API key" },
    jwt: {
      type: "http",
      scheme: "bearer",
      bearerFormat: "JWT",
      description: "session token as a JWT (GET /api/billing/token); billing endpoints",
    },
  },
  byMode: {
    none: [],
    optional: [{}, { session: [] }, { apiKey: [] }],
    user: [{ session: [] }, { apiKey: [] }],
    jwt: [{ session: [] }, { apiKey: [] }, { jwt: [] }],
    session: [{ session: [] }],
  },
  default: [{ session: [] }, { apiKey: [] }],
};

/** True when a browser says the request comes from another site (platform/web/same-origin). */
export function isForeignOrigin(request: Request): boolean {
  return isCrossSite(
    {
      origin: request.headers.get("origin"),
      host: request.headers.get("host") ?? new URL(request.url).host,
      secFetchSite: request.headers.get("sec-fetch-site"),
    },
    new URL(env().APP_URL).host,
  );
}

export function assertSameOrigin(request: Request): void {
  if (isUnsafeMethod(request.method) && isForeignOrigin(request)) {
    throw new DomainError(403, "Cross-site request refused");
  }
}

/** Reads the credential the request carries; throws 401 for an unusable Authorization header. */
export async function authenticate(
  request: Request,
  options: { jwt?: boolean } = {},
): Promise<Auth | undefined> {
  const authorization = request.headers.get("authorization");
  if (authorization) {
    const match = /^Bearer\s+(\S+)$/i.exec(authorization);
    if (!match) throw new DomainError(401, "Authorization must be 'Bearer sk_…'");
    if (options.jwt && looksLikeJwt(match[1]!)) {
      const verified = await verifySessionJwt(match[1]!);
      if (!verified) throw new DomainError(401, "Invalid or expired token");
      return {
        user: verified.user,
        person: verified.user,
        via: "jwt",
        sessionId: verified.sessionId,
        auditActor: userActor(verified.user.id),
      };
    }
    const resolved = await resolveApiKey(match[1]!);
    if (!resolved) throw new DomainError(401, "Invalid API key");
    return {
      user: resolved.user,
      person: resolved.user,
      via: "apiKey",
      keyId: resolved.keyId,
      auditActor: { type: "api_key", id: resolved.keyId, userId: resolved.user.id },
    };
  }
  const session = await resolveSession(request);
  if (!session) return undefined;
  return {
    user: session.user,
    person: session.user,
    via: "session",
    sessionId: session.sessionId,
    auditActor: userActor(session.user.id),
    ...(session.setCookie ? { setCookie: session.setCookie } : {}),
  };
}

/** The header naming the organisation a request acts for (decision 0203). */
export const ORGANISATION_HEADER = "x-organization";

/**
 * The credential's person acting for the organisation: a member whose role allows what the
 * endpoint does (`permission`). An endpoint that declares none acts for a person only.
 */
async function actForOrganisation(
  auth: Auth,
  organisationId: string,
  permission: string | undefined,
): Promise<Auth> {
  const acting = await organisationActing(organisationId, auth.person.id);
  if (!acting) throw new DomainError(404, "Organisation not found");
  if (permission === undefined) {
    throw new DomainError(
      403,
      "This endpoint acts for a person, not an organisation: send it without X-Organization",
    );
  }
  if (!isPermission(permission)) throw new Error(`unknown permission "${permission}"`);
  if (!allows(acting.role, permission)) throw refuseRole(acting.role, permission);
  if (acting.organisation.suspendedAt) {
    throw new DomainError(403, "This organisation is suspended");
  }
  return {
    ...auth,
    user: acting.organisation,
    organisation: { id: organisationId, role: acting.role },
    // Entries concern the organisation; the actor stays the person (or their key).
    auditActor: { ...auth.auditActor, userId: organisationId },
  };
}

/**
 * Applies an auth mode: the credential, its kind, the cross-site check for cookies, and the
 * organisation the request acts for (X-Organization), checked against `permission`.
 */
export async function authorize(
  request: Request,
  mode: AuthMode,
  permission?: string,
): Promise<Auth | undefined> {
  if (mode === "none") return undefined;
  const auth = await authenticate(request, { jwt: mode === "jwt" });
  if (!auth) {
    if (mode === "optional") return undefined;
    throw new DomainError(401, "Authentication required");
  }
  if (mode === "session" && auth.via !== "session") {
    throw new DomainError(403, "This operation needs a signed-in session; API keys cannot do it");
  }
  // Cookies ride along on cross-site requests; API keys do not, so only cookies need this.
  if (auth.via === "session") assertSameOrigin(request);
  const organisationId = request.headers.get(ORGANISATION_HEADER)?.trim();
  if (organisationId) return actForOrganisation(auth, organisationId, permission);
  return auth;
}
