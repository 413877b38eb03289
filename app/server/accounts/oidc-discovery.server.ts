import { createRemoteJWKSet, type JWTVerifyGetKey } from "jose";
import { z } from "zod";

// OpenID Connect discovery (OpenID Connect Discovery 1.0, section 4): the provider's endpoints
// and signing keys, read from <issuer>/.well-known/openid-configuration. Cached per issuer for
// an hour, so a sign-in costs no extra round trip; a failed fetch is not cached, so the next
// sign-in tries again. The key set refetches by itself when a token names a key it has not seen
// (the provider rotated), at most every 30 s (jose's cooldown).

const metadataSchema = z.object({
  issuer: z.string(),
  authorization_endpoint: z.url(),
  token_endpoint: z.url(),
  jwks_uri: z.url(),
  userinfo_endpoint: z.url().optional(),
  code_challenge_methods_supported: z.array(z.string()).optional(),
  id_token_signing_alg_values_supported: z.array(z.string()).optional(),
});

export type OidcMetadata = z.infer<typeof metadataSchema>;

export interface OidcProviderInfo {
  metadata: OidcMetadata;
  /** The provider's public keys, for checking ID-token signatures. */
  keys: JWTVerifyGetKey;
}

const TTL_MS = 60 * 60 * 1000;
const cache = new Map<string, { at: number; info: Promise<OidcProviderInfo> }>();

/** The configuration document's URL: the issuer with the well-known path appended. */
export const discoveryUrl = (issuer: string) =>
  `${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`;

async function discover(issuer: string): Promise<OidcProviderInfo> {
  const response = await fetch(discoveryUrl(issuer), {
    headers: { accept: "application/json" },
    signal: AbortSignal.timeout(10_000),
  });
  if (!response.ok) throw new Error(`OIDC discovery at ${issuer} answered ${response.status}`);
  const metadata = metadataSchema.parse(await response.json());
  // The document must name the issuer it was fetched for (Discovery 4.3): otherwise its tokens
  // would be checked against some other issuer's keys.
  if (metadata.issuer !== issuer) {
    throw new Error(`OIDC discovery at ${issuer} names another issuer: ${metadata.issuer}`);
  }
  const methods = metadata.code_challenge_methods_supported;
  if (methods && !methods.includes("S256")) {
    throw new Error(`OIDC provider ${issuer} does not support PKCE with S256`);
  }
  return { metadata, keys: createRemoteJWKSet(new URL(metadata.jwks_uri)) };
}

/** The issuer's endpoints and keys, from the cache while they are under an hour old. */
export function oidcProviderInfo(issuer: string, now = Date.now()): Promise<OidcProviderInfo> {
  const hit = cache.get(issuer);
  if (hit && now - hit.at < TTL_MS) return hit.info;
  const info = discover(issuer);
  cache.set(issuer, { at: now, info });
  info.catch(() => {
    if (cache.get(issuer)?.info === info) cache.delete(issuer);
  });
  return info;
}

/** Tests: forget every discovered provider. */
export function resetOidcDiscovery(): void {
  cache.clear();
}
