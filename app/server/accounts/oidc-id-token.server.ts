import { errors, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from "jose";
import { z } from "zod";

// The ID token's checks (OpenID Connect Core 1.0, 3.1.3.7): signature against the provider's
// published keys, `iss` the configured issuer, `aud` our client id (and `azp` ours when there
// are several audiences), `exp` in the future and `iat` in the past and recent, each with a
// minute of clock skew, and `nonce` the one this browser's attempt sent.

/** An ID token that failed a check; the message says which (logged, never shown). */
export class IdTokenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "IdTokenError";
  }
}

export const CLOCK_SKEW_SECONDS = 60;
/** An ID token comes straight from the token endpoint; an older one is not this sign-in's. */
export const MAX_ID_TOKEN_AGE_SECONDS = 10 * 60;

const claimsSchema = z.looseObject({
  sub: z.string().min(1).max(255),
  nonce: z.string().optional(),
  azp: z.string().optional(),
  email: z.string().optional(),
  email_verified: z.unknown().optional(),
  name: z.string().optional(),
  picture: z.string().optional(),
});

export type IdTokenClaims = z.infer<typeof claimsSchema> & JWTPayload;

export interface IdTokenExpectations {
  issuer: string;
  clientId: string;
  nonce: string;
  keys: JWTVerifyGetKey;
}

function reason(error: unknown): string {
  if (error instanceof errors.JWSSignatureVerificationFailed) return "signature does not verify";
  if (error instanceof errors.JWKSNoMatchingKey)
    return "signed with a key the provider does not publish";
  if (error instanceof errors.JWTExpired) return `expired (${error.claim})`;
  if (error instanceof errors.JWTClaimValidationFailed) return `claim ${error.claim} is wrong`;
  if (error instanceof errors.JOSEError) return error.code;
  return "cannot be read";
}

/** The verified claims of `idToken`, or an IdTokenError naming the failed check. */
export async function verifyIdToken(
  idToken: string,
  expected: IdTokenExpectations,
): Promise<IdTokenClaims> {
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(idToken, expected.keys, {
      issuer: expected.issuer,
      audience: expected.clientId,
      clockTolerance: CLOCK_SKEW_SECONDS,
      maxTokenAge: MAX_ID_TOKEN_AGE_SECONDS,
      requiredClaims: ["exp", "iat", "sub"],
    }));
  } catch (error) {
    throw new IdTokenError(`ID token ${reason(error)}`);
  }
  const parsed = claimsSchema.safeParse(payload);
  if (!parsed.success) throw new IdTokenError("ID token claims are malformed");
  const claims = parsed.data;
  if (Array.isArray(payload.aud) && payload.aud.length > 1 && claims.azp !== expected.clientId) {
    throw new IdTokenError("ID token has several audiences and azp is not this client");
  }
  if (claims.azp !== undefined && claims.azp !== expected.clientId) {
    throw new IdTokenError("ID token azp is another client");
  }
  if (claims.nonce !== expected.nonce) {
    throw new IdTokenError("ID token nonce is not this sign-in attempt's");
  }
  return { ...payload, ...claims };
}
