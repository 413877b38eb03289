import { OAuth2RequestError, OAuth2Strategy } from "remix-auth-oauth2";
import { z } from "zod";
import { refuseSignIn } from "../organisations/sso-enforcement.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { payReferral } from "./credits.server.ts";
import { toUser, type User, type UserRow } from "./model.server.ts";
import { revokeUnprovenAccess } from "./takeover.server.ts";
import { createUser, findUserByEmail } from "./users.server.ts";

// OAuth sign-in with remix-auth-oauth2 (authorization code + state + PKCE S256). Provider
// `oauth1` is Google, `oauth2` is GitHub. One URL serves both legs: without `state` it
// redirects to the provider, with `state` it is the callback. An existing user with the same
// email is linked on first sign-in (if we had not verified that email ourselves, the account is
// taken over: password, sessions, keys revoked); an unverified provider email is refused.
// docs/decisions/0017-oauth.md

export const oauthProviders = ["oauth1", "oauth2"] as const;
export type OAuthProvider = (typeof oauthProviders)[number];
/** Every provider whose identities live in oauth_accounts: the OAuth two and OpenID Connect. */
export type LinkProvider = OAuthProvider | "oidc";

export const providerLabels: Record<OAuthProvider, string> = {
  oauth1: "Google",
  oauth2: "GitHub",
};

export interface OAuthProfile {
  providerAccountId: string;
  email: string;
  emailVerified: boolean;
  name?: string | undefined;
  avatar?: string | undefined;
  /** The provider's groups for this identity (OIDC), null when it sent none; undefined: the
   * provider has no groups (OAuth), the link's groups are left alone. */
  groups?: string[] | null | undefined;
}

const googleUser = z.object({
  sub: z.string(),
  email: z.email(),
  email_verified: z.boolean().optional(),
  name: z.string().optional(),
  picture: z.string().optional(),
});
const githubUser = z.object({
  id: z.number(),
  login: z.string(),
  name: z.string().nullish(),
  avatar_url: z.string().nullish(),
});
const githubEmails = z.array(
  z.object({ email: z.string(), primary: z.boolean(), verified: z.boolean() }),
);

async function getJson(url: string, accessToken: string): Promise<unknown> {
  const response = await fetch(url, {
    headers: {
      authorization: `Bearer ${accessToken}`,
      accept: "application/json",
      "user-agent": "agent-platform",
    },
    signal: AbortSignal.timeout(10_000),
  });
  if (!response.ok) throw new Error(`${url} answered ${response.status}`);
  return response.json();
}

const httpsOrUndefined = (url: string | null | undefined) =>
  url?.startsWith("https://") ? url : undefined;

interface ProviderConfig {
  clientId: string;
  clientSecret: string;
  authorizeUrl: string;
  tokenUrl: string;
  scopes: string[];
  profile(accessToken: string): Promise<OAuthProfile>;
}

function providerConfig(provider: OAuthProvider): ProviderConfig | undefined {
  const e = env();
  if (provider === "oauth1") {
    if (!e.OAUTH1_CLIENT_ID || !e.OAUTH1_CLIENT_SECRET) return undefined;
    return {
      clientId: e.OAUTH1_CLIENT_ID,
      clientSecret: e.OAUTH1_CLIENT_SECRET,
      authorizeUrl: e.OAUTH1_AUTHORIZE_URL,
      tokenUrl: e.OAUTH1_TOKEN_URL,
      scopes: ["openid", "email", "profile"],
      profile: async (token) => {
        const u = googleUser.parse(await getJson(e.OAUTH1_USERINFO_URL, token));
        return {
          providerAccountId: u.sub,
          email: u.email,
          emailVerified: u.email_verified === true,
          name: u.name,
          avatar: httpsOrUndefined(u.picture),
        };
      },
    };
  }
  if (!e.OAUTH2_CLIENT_ID || !e.OAUTH2_CLIENT_SECRET) return undefined;
  const api = e.OAUTH2_API_URL.replace(/\/$/, "");
  return {
    clientId: e.OAUTH2_CLIENT_ID,
    clientSecret: e.OAUTH2_CLIENT_SECRET,
    authorizeUrl: e.OAUTH2_AUTHORIZE_URL,
    tokenUrl: e.OAUTH2_TOKEN_URL,
    scopes: ["read:user", "user:email"],
    profile: async (token) => {
      const [user, emails] = await Promise.all([
        getJson(`${api}/user`, token).then((j) => githubUser.parse(j)),
        getJson(`${api}/user/emails`, token).then((j) => githubEmails.parse(j)),
      ]);
      // The primary address is the account's identity; if GitHub has not verified it, sign-in
      // is refused rather than falling back to some other (e.g. noreply) address.
      const chosen = emails.find((m) => m.primary) ?? emails.find((m) => m.verified);
      if (!chosen) throw new DomainError(403, "The GitHub account has no email address");
      return {
        providerAccountId: String(user.id),
        email: chosen.email,
        emailVerified: chosen.verified,
        name: user.name ?? user.login,
        avatar: httpsOrUndefined(user.avatar_url),
      };
    },
  };
}

export const isConfigured = (provider: OAuthProvider) => providerConfig(provider) !== undefined;

export const stateCookieName = (provider: LinkProvider) => `oauth_${provider}`;

let strategies = new Map<string, OAuth2Strategy<User>>();

/** The provider's strategy, or a 503 when it is not configured. */
export function oauthStrategy(provider: OAuthProvider): OAuth2Strategy<User> {
  const config = providerConfig(provider);
  if (!config) {
    throw new DomainError(
      503,
      `Sign-in with ${provider} (${providerLabels[provider]}) is not configured on this server`,
    );
  }
  const { APP_URL } = env();
  const cacheKey = JSON.stringify([provider, APP_URL, config.clientId, config.authorizeUrl]);
  let strategy = strategies.get(cacheKey);
  if (!strategy) {
    if (strategies.size > 8) strategies = new Map();
    strategy = new OAuth2Strategy<User>(
      {
        cookie: {
          name: stateCookieName(provider),
          path: `/api/auth/${provider}`,
          ...(APP_URL.startsWith("https:") ? { secure: true as const } : {}),
        },
        clientId: config.clientId,
        clientSecret: config.clientSecret,
        authorizationEndpoint: config.authorizeUrl,
        tokenEndpoint: config.tokenUrl,
        redirectURI: new URL(`/api/auth/${provider}`, APP_URL),
        scopes: config.scopes,
      },
      async ({ tokens }) => {
        // GitHub reports token errors with HTTP 200 and {error}: check before using the token.
        const data = tokens.data as { error?: string; error_description?: string };
        if (data.error)
          throw new OAuth2RequestError(data.error, data.error_description ?? null, null, null);
        return signInWithOAuth(provider, await config.profile(tokens.accessToken()));
      },
    );
    strategies.set(cacheKey, strategy);
  }
  return strategy;
}

const signInMethod = (provider: LinkProvider) => (provider === "oidc" ? "oidc" : "oauth");

/**
 * The user behind an OAuth profile: the linked one, else the one with the same verified email
 * (linked now; taken over if we had not verified that email, see revokeUnprovenAccess), else a
 * new user. Never a duplicate.
 */
export async function signInWithOAuth(
  provider: LinkProvider,
  profile: OAuthProfile,
): Promise<User> {
  const sql = db();
  const [linked] = await sql<UserRow[]>`
    select u.* from oauth_accounts a join users u on u.id = a.user_id
    where a.provider = ${provider} and a.provider_account_id = ${profile.providerAccountId}`;
  // An organisation requiring SSO for the email's domain refuses the contract's OAuth
  // providers; the operator's install-wide OIDC (and any SSO link) is SSO (docs/decisions/0212).
  if ((oauthProviders as readonly string[]).includes(provider)) {
    const refused = await refuseSignIn(linked?.email ?? profile.email, linked?.id, "oauth");
    if (refused) throw refused;
  }
  if (linked) {
    // Group membership changes at the provider; the link keeps the latest sign-in's.
    if (profile.groups !== undefined) {
      await sql`
        update oauth_accounts set groups = ${profile.groups}, groups_updated_at = now()
        where provider = ${provider} and provider_account_id = ${profile.providerAccountId}`;
    }
    await recordAudit({
      action: "auth.signin",
      actor: { type: "user", id: linked.id, userId: linked.id },
      details: { method: signInMethod(provider), provider },
    });
    return toUser(linked);
  }
  if (!profile.emailVerified) {
    throw new DomainError(403, "The provider has not verified this email address");
  }
  return sql.begin(async (t) => {
    const existing = await findUserByEmail(profile.email, t);
    let user: User;
    if (existing) {
      const [other] = await t`
        select 1 from oauth_accounts where user_id = ${existing.id} and provider = ${provider}`;
      if (other) {
        throw new DomainError(409, "This account is already linked to another provider identity");
      }
      if (existing.email_verified) {
        user = toUser(existing);
        logger().info({ userId: user.id, provider }, "OAuth identity linked to an existing user");
      } else {
        // We never verified this address: whoever registered it may not own it (registration
        // does not check the mailbox). The provider has just verified it, so its owner gets the
        // account, and whatever the registrant set up (password, sessions, API keys,
        // authenticators) stops working. docs/decisions/0017-oauth.md
        const revoked = await revokeUnprovenAccess(existing.id, t);
        await t`update users set email_verified = true, updated_at = now() where id = ${existing.id}`;
        await payReferral(t, existing.id);
        user = toUser({ ...existing, email_verified: true, password_hash: null });
        logger().info(
          { userId: user.id, provider, revoked },
          "OAuth identity took over an existing user with an unverified email",
        );
      }
    } else {
      user = await createUser({ email: profile.email, name: profile.name, emailVerified: true }, t);
      if (profile.avatar) {
        await t`update users set avatar_url = ${profile.avatar} where id = ${user.id}`;
        user = { ...user, avatarUrl: profile.avatar };
      }
    }
    await t`
      insert into oauth_accounts (provider, provider_account_id, user_id, email, groups,
        groups_updated_at)
      values (${provider}, ${profile.providerAccountId}, ${user.id}, ${profile.email},
        ${profile.groups ?? null}, ${profile.groups === undefined ? null : new Date()})`;
    const actor = { type: "user" as const, id: user.id, userId: user.id };
    await recordAudit({ action: "oauth.linked", actor, target: provider }, t);
    await recordAudit(
      { action: "auth.signin", actor, details: { method: signInMethod(provider), provider } },
      t,
    );
    return user;
  }) as Promise<User>;
}

/** Where a failed OAuth callback sends the browser: the sign-in page with a reason. */
export function oauthFailureReason(error: unknown): string {
  if (error instanceof OAuth2RequestError) {
    return error.code === "access_denied" ? "oauth_denied" : "oauth_failed";
  }
  if (error instanceof DomainError && error.extra?.sso === true) return "sso_required";
  if (error instanceof DomainError && error.status === 403) return "oauth_unverified";
  if (error instanceof DomainError && error.status === 409) return "oauth_conflict";
  return "oauth_failed";
}
