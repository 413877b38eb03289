import { createHash } from "node:crypto";
import type { OAuth2Tokens } from "arctic";
import { OAuth2Strategy } from "remix-auth-oauth2";
import { z } from "zod";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import type { User } from "./model.server.ts";
import { type OAuthProfile, signInWithOAuth, stateCookieName } from "./oauth.server.ts";
import { type OidcProviderInfo, oidcProviderInfo } from "./oidc-discovery.server.ts";
import { type IdTokenClaims, verifyIdToken } from "./oidc-id-token.server.ts";

// Install-wide OpenID Connect sign-in (issue 49; docs/decisions/0205). The OAuth sign-in's
// strategy (remix-auth-oauth2: state and an S256 PKCE verifier in a short-lived httpOnly
// cookie) with what OIDC adds: endpoints from discovery, a nonce, and the ID token checked
// (oidc-id-token.server.ts) before anything in it is used. Accounts are found, linked and made
// exactly as the OAuth sign-in does (signInWithOAuth), under provider `oidc`.

export const OIDC_PATH = "/api/auth/oidc";

export interface OidcConfig {
  issuer: string;
  clientId: string;
  clientSecret: string;
  label: string;
  scopes: string[];
  groupsClaim: string;
}

export function oidcConfig(): OidcConfig | undefined {
  const e = env();
  if (!e.OIDC_ISSUER || !e.OIDC_CLIENT_ID || !e.OIDC_CLIENT_SECRET) return undefined;
  const scopes = new Set(["openid", ...e.OIDC_SCOPES.split(/\s+/).filter(Boolean)]);
  return {
    issuer: e.OIDC_ISSUER,
    clientId: e.OIDC_CLIENT_ID,
    clientSecret: e.OIDC_CLIENT_SECRET,
    label: e.OIDC_NAME ?? new URL(e.OIDC_ISSUER).hostname,
    scopes: [...scopes],
    groupsClaim: e.OIDC_GROUPS_CLAIM,
  };
}

/** The "Sign in with …" button's provider name, or undefined when OIDC is off (no button). */
export const oidcButtonLabel = (): string | undefined => oidcConfig()?.label;

/**
 * The nonce of an attempt, derived from its PKCE verifier: the verifier lives only in this
 * browser's state cookie, so a token minted for another attempt (or another browser) carries
 * another nonce, and the cookie needs no second value.
 */
export const nonceFor = (codeVerifier: string) =>
  createHash("sha256").update(`oidc-nonce:${codeVerifier}`).digest("base64url");

const MAX_GROUPS = 256;
const MAX_GROUP_LENGTH = 256;

/** The groups claim as strings (a single string is one group), null when absent. */
export function groupsOf(value: unknown): string[] | null {
  if (value === undefined || value === null) return null;
  const list = Array.isArray(value) ? value : [value];
  return list
    .filter((g): g is string => typeof g === "string" && g.length > 0)
    .filter((g) => g.length <= MAX_GROUP_LENGTH)
    .slice(0, MAX_GROUPS);
}

const userinfoSchema = z.looseObject({
  sub: z.string(),
  email: z.string().optional(),
  email_verified: z.unknown().optional(),
  name: z.string().optional(),
});

async function userinfo(url: string, accessToken: string) {
  const response = await fetch(url, {
    headers: { authorization: `Bearer ${accessToken}`, accept: "application/json" },
    signal: AbortSignal.timeout(10_000),
  });
  if (!response.ok) throw new Error(`OIDC userinfo answered ${response.status}`);
  return userinfoSchema.parse(await response.json());
}

// Some providers (Cognito) send the boolean as a string.
const isTrue = (v: unknown) => v === true || v === "true";

/** The profile behind verified claims; the userinfo endpoint only when the token has no email. */
export async function oidcProfile(
  claims: IdTokenClaims,
  config: OidcConfig,
  info: OidcProviderInfo,
  accessToken: () => string,
): Promise<OAuthProfile> {
  let source: Record<string, unknown> = claims;
  if (claims.email === undefined && info.metadata.userinfo_endpoint) {
    const more = await userinfo(info.metadata.userinfo_endpoint, accessToken());
    // Core 5.3.2: userinfo about another subject must not be used.
    if (more.sub !== claims.sub) throw new Error("OIDC userinfo is about another subject");
    source = { ...more, ...claims };
  }
  const email = z.email().safeParse(source.email);
  if (!email.success) {
    throw new DomainError(403, "The provider did not give an email address");
  }
  const name = typeof source.name === "string" ? source.name : undefined;
  const picture = typeof source.picture === "string" ? source.picture : undefined;
  return {
    providerAccountId: `${info.metadata.issuer}#${claims.sub}`,
    email: email.data,
    emailVerified: isTrue(source.email_verified),
    name,
    avatar: picture?.startsWith("https://") ? picture : undefined,
    groups: groupsOf(source[config.groupsClaim]),
  };
}

// The verified claims of each token response, for the verify callback (which gets the tokens,
// not the PKCE verifier the nonce comes from).
const verified = new WeakMap<OAuth2Tokens, IdTokenClaims>();

/**
 * One OpenID Connect connection: the install's (from env) or an organisation's (decision 0210).
 * The flow lives under `path`: the state cookie's path, the redirect URI `<path>/callback`.
 */
export interface OidcConnection {
  config: OidcConfig;
  path: string;
  cookieName: string;
  /** The account behind a verified profile (found, linked or made). */
  signIn(profile: OAuthProfile): Promise<User>;
}

/** The OAuth strategy plus a nonce in the request and the ID token's checks on the answer. */
class OidcStrategy extends OAuth2Strategy<User> {
  private readonly config: OidcConfig;
  private readonly info: OidcProviderInfo;

  constructor(
    options: OAuth2Strategy.ConstructorOptions,
    connection: OidcConnection,
    info: OidcProviderInfo,
  ) {
    super(options, async ({ tokens }) => {
      const claims = verified.get(tokens);
      if (!claims) throw new Error("OIDC token response was not verified");
      const profile = await oidcProfile(claims, connection.config, info, () =>
        tokens.accessToken(),
      );
      return connection.signIn(profile);
    });
    this.config = connection.config;
    this.info = info;
  }

  protected override createAuthorizationURL() {
    const attempt = super.createAuthorizationURL();
    attempt.url.searchParams.set("nonce", nonceFor(attempt.codeVerifier));
    return attempt;
  }

  protected override async validateAuthorizationCode(code: string, codeVerifier: string) {
    const tokens = await super.validateAuthorizationCode(code, codeVerifier);
    const idToken = z.string().safeParse((tokens.data as { id_token?: unknown }).id_token);
    if (!idToken.success) throw new Error("OIDC token response has no ID token");
    const claims = await verifyIdToken(idToken.data, {
      issuer: this.info.metadata.issuer,
      clientId: this.config.clientId,
      nonce: nonceFor(codeVerifier),
      keys: this.info.keys,
    });
    verified.set(tokens, claims);
    return tokens;
  }
}

// Strategies by connection (settings and discovery): an organisation's is reused across
// sign-ins; a few dozen at most are kept (a miss costs only an object, discovery is cached).
const MAX_STRATEGIES = 64;
const strategies = new Map<string, { info: OidcProviderInfo; strategy: OidcStrategy }>();

/** The strategy of `connection` (after discovery). */
export async function oidcStrategyFor(connection: OidcConnection): Promise<OAuth2Strategy<User>> {
  const { config, path } = connection;
  const info = await oidcProviderInfo(config.issuer);
  const { APP_URL } = env();
  const key = JSON.stringify([APP_URL, path, connection.cookieName, config]);
  const hit = strategies.get(key);
  // A fresh discovery (an hour on) makes a strategy with its endpoints.
  if (hit?.info === info) return hit.strategy;
  const strategy = new OidcStrategy(
    {
      cookie: {
        name: connection.cookieName,
        path,
        ...(APP_URL.startsWith("https:") ? { secure: true as const } : {}),
      },
      clientId: config.clientId,
      clientSecret: config.clientSecret,
      authorizationEndpoint: info.metadata.authorization_endpoint,
      tokenEndpoint: info.metadata.token_endpoint,
      redirectURI: new URL(`${path}/callback`, APP_URL),
      scopes: config.scopes,
    },
    connection,
    info,
  );
  if (strategies.size >= MAX_STRATEGIES) strategies.clear();
  strategies.set(key, { info, strategy });
  return strategy;
}

/** The install's OIDC strategy (after discovery), or a 503 when OIDC is not configured. */
export async function oidcStrategy(): Promise<OAuth2Strategy<User>> {
  const config = oidcConfig();
  if (!config)
    throw new DomainError(503, "OpenID Connect sign-in is not configured on this server");
  return oidcStrategyFor({
    config,
    path: OIDC_PATH,
    cookieName: stateCookieName("oidc"),
    signIn: (profile) => signInWithOAuth("oidc", profile),
  });
}
