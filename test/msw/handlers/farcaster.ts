import { exportJWK, generateKeyPair, type JWK, SignJWT } from "jose";
import { HttpResponse, http } from "msw";

// Farcaster Quick Auth (the identity network `idnet`): the issuer's key set at
// https://auth.farcaster.xyz/.well-known/jwks.json, and a helper that signs Quick Auth tokens
// with the served key (or with a stranger's key, for wrong-signature tests). An issuer at
// https://idnet-down.test is unreachable.

export const QUICK_AUTH_ORIGIN = "https://auth.farcaster.xyz";
export const QUICK_AUTH_DOWN_ORIGIN = "https://idnet-down.test";

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;
let keys: Promise<{ served: KeyPair; stranger: KeyPair; jwk: JWK }> | undefined;

function issuerKeys() {
  keys ??= (async () => {
    const served = await generateKeyPair("ES256", { extractable: true });
    const stranger = await generateKeyPair("ES256", { extractable: true });
    const jwk = {
      ...(await exportJWK(served.publicKey)),
      kid: "test-key-1",
      alg: "ES256",
      use: "sig",
    };
    return { served, stranger, jwk };
  })();
  return keys;
}

export interface QuickAuthClaims {
  fid: number;
  aud: string;
  /** Seconds from now (negative: already expired). Default 3600. */
  expiresIn?: number;
  iss?: string;
  /** Sign with a key the issuer does not serve (same kid). */
  wrongKey?: boolean;
}

export async function signQuickAuthToken(claims: QuickAuthClaims): Promise<string> {
  const { served, stranger } = await issuerKeys();
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: "ES256", kid: "test-key-1", typ: "JWT" })
    .setSubject(String(claims.fid))
    .setIssuer(claims.iss ?? QUICK_AUTH_ORIGIN)
    .setAudience(claims.aud)
    .setIssuedAt(now - 10)
    .setExpirationTime(now + (claims.expiresIn ?? 3600))
    .sign((claims.wrongKey ? stranger : served).privateKey);
}

export const farcasterHandlers = [
  http.get(`${QUICK_AUTH_ORIGIN}/.well-known/jwks.json`, async () =>
    HttpResponse.json({ keys: [(await issuerKeys()).jwk] }),
  ),
  http.get(`${QUICK_AUTH_DOWN_ORIGIN}/.well-known/jwks.json`, () => HttpResponse.error()),
];
