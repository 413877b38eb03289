import { randomBytes } from "node:crypto";
import { createClient, Errors } from "@farcaster/quick-auth";
import { db } from "../platform/db.server.ts";
import type { Queryable } from "../platform/db-helpers.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { sha256 } from "../platform/ids.server.ts";
import { logger } from "../platform/logger.server.ts";
import { checkTokenGating, gatingRefusal } from "./token-gating.server.ts";

// Identity network (idnet = Farcaster) sign-in with Quick Auth JWTs: the token's signature is
// checked against the issuer's key set (<IDNET_ISSUER_ORIGIN>/.well-known/jwks.json), its
// issuer, audience (APP_URL's host) and expiry. A valid token (and, when an address is given,
// a passed token-gating check) yields our own base64 session token, valid 24 h, refreshable by
// rotation. docs/decisions/0052-identity-network.md

export const IDNET_SESSION_SECONDS = 86_400;
/** A session token can still be refreshed this long after it expired. */
export const IDNET_REFRESH_GRACE_SECONDS = 7 * 86_400;

/** jose / Quick Auth error codes that mean "this token is bad", not "the issuer is down". */
const TOKEN_ERRORS = new Set([
  "ERR_JWT_EXPIRED",
  "ERR_JWT_CLAIM_VALIDATION_FAILED",
  "ERR_JWT_INVALID",
  "ERR_JWS_INVALID",
  "ERR_JWS_SIGNATURE_VERIFICATION_FAILED",
  "ERR_JWKS_NO_MATCHING_KEY",
  "ERR_JWKS_MULTIPLE_MATCHING_KEYS",
  "ERR_JOSE_NOT_SUPPORTED",
  "ERR_JOSE_ALG_NOT_ALLOWED",
]);

function isTokenError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error instanceof Errors.InvalidTokenError) return true;
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" && TOKEN_ERRORS.has(code);
}

export type AccessLevel = "token_holder" | "basic";

export interface IdnetVerification {
  fid: string;
  sessionToken: string;
  expiresIn: number;
  address: string;
  tokenGated: boolean;
  accessLevel: AccessLevel;
}

/** Verifies a Quick Auth JWT; returns its fid. 401 for a bad token, 500 when the issuer is down. */
export async function verifyIdnetToken(token: string): Promise<string> {
  const { IDNET_ISSUER_ORIGIN, APP_URL } = env();
  const origin = IDNET_ISSUER_ORIGIN.replace(/\/$/, "");
  try {
    const payload = await createClient({ origin }).verifyJwt({
      token,
      domain: new URL(APP_URL).host,
    });
    if (payload.sub === undefined || payload.sub === null) {
      throw new DomainError(401, "Identity token has no subject");
    }
    return String(payload.sub);
  } catch (error) {
    if (error instanceof DomainError) throw error;
    if (isTokenError(error)) {
      throw new DomainError(401, `Invalid identity token: ${(error as Error).message}`);
    }
    logger().warn({ err: error, origin }, "identity network: key set unavailable");
    throw new DomainError(
      500,
      "Identity token verification failed: the issuer could not be reached",
    );
  }
}

async function issueSession(
  fid: string,
  address: string | null,
  accessLevel: AccessLevel,
  sql: Queryable = db(),
): Promise<string> {
  const token = randomBytes(32).toString("base64");
  await sql`
    insert into idnet_sessions (token_hash, fid, address, access_level, expires_at)
    values (${sha256(token)}, ${fid}, ${address}, ${accessLevel},
            now() + make_interval(secs => ${IDNET_SESSION_SECONDS}))`;
  return token;
}

export async function verifyIdnet(fidToken: string, address?: string): Promise<IdnetVerification> {
  const fid = await verifyIdnetToken(fidToken);
  let tokenGated = false;
  let checked: string | null = null;
  if (address) {
    const check = await checkTokenGating(address);
    checked = check.address;
    if (check.tokenGated && !check.hasAccess) throw gatingRefusal(check);
    tokenGated = check.tokenGated;
  }
  const accessLevel: AccessLevel = tokenGated ? "token_holder" : "basic";
  const sessionToken = await issueSession(fid, checked, accessLevel);
  return {
    fid,
    sessionToken,
    expiresIn: IDNET_SESSION_SECONDS,
    address: checked ?? "",
    tokenGated,
    accessLevel,
  };
}

/**
 * Rotates a session token: the old one is revoked and a new one (24 h) issued. 401 for an
 * unknown, revoked or long-expired token. A token is usable once as a refresh token.
 */
export async function refreshIdnetSession(
  refreshToken: string,
): Promise<{ sessionToken: string; expiresIn: number }> {
  return db().begin(async (t) => {
    const [old] = await t<{ fid: string; address: string | null; access_level: AccessLevel }[]>`
      update idnet_sessions set revoked_at = now()
      where token_hash = ${sha256(refreshToken)} and revoked_at is null
        and expires_at > now() - make_interval(secs => ${IDNET_REFRESH_GRACE_SECONDS})
      returning fid, address, access_level`;
    if (!old) throw new DomainError(401, "Invalid or expired refresh token");
    const sessionToken = await issueSession(old.fid, old.address, old.access_level, t);
    return { sessionToken, expiresIn: IDNET_SESSION_SECONDS };
  }) as Promise<{ sessionToken: string; expiresIn: number }>;
}
