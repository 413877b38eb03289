import { jwtVerify, SignJWT } from "jose";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { secrets } from "../platform/secrets.server.ts";
import { toUser, type User, type UserRow } from "./model.server.ts";

// The signed session token as a Bearer JWT (the contract's "JWT" authentication of the billing
// endpoints): HS256 under a key derived from SESSION_SECRET, `sub` = user id, `sid` = the server
// session it was minted from. It is accepted only while that session is still active, so
// signing out or revoking the session revokes the token too. docs/decisions/0043-billing-jwt.md

export const SESSION_JWT_LIFETIME_SECONDS = 15 * 60;
const AUDIENCE = "agent-platform:api";

const key = () => new TextEncoder().encode(`session-jwt|${secrets().sessionSecret}`);

/** A JWT for the given session, valid 15 minutes (and only while the session lives). */
export async function signSessionJwt(userId: string, sessionId: string) {
  const expiresAt = new Date(Date.now() + SESSION_JWT_LIFETIME_SECONDS * 1000);
  const token = await new SignJWT({ sid: sessionId })
    .setProtectedHeader({ alg: "HS256", typ: "JWT" })
    .setSubject(userId)
    .setIssuer(env().APP_URL)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(Math.floor(expiresAt.getTime() / 1000))
    .sign(key());
  return { token, expiresAt: expiresAt.toISOString() };
}

/** True for a string shaped like a compact JWS (three base64url parts). */
export const looksLikeJwt = (token: string) =>
  /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token) && token.startsWith("eyJ");

/** The user and session of a valid, unexpired JWT whose session is still active. */
export async function verifySessionJwt(
  token: string,
): Promise<{ user: User; sessionId: string } | undefined> {
  let sub: string | undefined;
  let sid: unknown;
  try {
    const { payload } = await jwtVerify(token, key(), {
      algorithms: ["HS256"],
      audience: AUDIENCE,
      issuer: env().APP_URL,
    });
    sub = payload.sub;
    sid = payload.sid;
  } catch {
    return undefined;
  }
  if (!sub || typeof sid !== "string") return undefined;
  const [row] = await db()<UserRow[]>`
    select u.* from sessions s join users u on u.id = s.user_id
    where s.id = ${sid} and s.user_id = ${sub} and s.revoked_at is null and s.expires_at > now()
      and u.suspended_at is null`;
  return row ? { user: toUser(row), sessionId: sid } : undefined;
}
