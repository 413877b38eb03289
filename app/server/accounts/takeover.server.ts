import type { Queryable } from "../platform/db-helpers.server.ts";
import { revokeAllSessions } from "./sessions.server.ts";

// Handing an account over to the person who just proved they own its identity (a provider-
// verified email on OAuth sign-in, or the wallet behind a `@wallet.invalid` email), when someone
// else may have registered it first without proving anything. Every way in that the earlier
// registrant could have set up stops working; what they created (agents, files) stays with the
// account. docs/decisions/0017-oauth.md, docs/decisions/0051-wallet-sign-in.md

export interface RevokedAccess {
  sessions: number;
  apiKeys: number;
  webauthnCredentials: number;
  oauthLinks: number;
  walletLinks: number;
}

/**
 * Inside the caller's transaction: clears the password (the owner sets one with a password
 * reset), revokes every session (and with them their session JWTs), deletes the API keys, the
 * WebAuthn authenticators and pending registration challenges, and any OAuth or wallet link
 * already on the account. The caller links the new identity afterwards.
 */
export async function revokeUnprovenAccess(userId: string, t: Queryable): Promise<RevokedAccess> {
  await t`update users set password_hash = null, updated_at = now() where id = ${userId}`;
  const [live] = await t<{ n: number }[]>`
    select count(*)::int as n from sessions
    where user_id = ${userId} and revoked_at is null and expires_at > now()`;
  await revokeAllSessions(userId, t);
  const apiKeys = await t`delete from api_keys where user_id = ${userId} returning 1`;
  const webauthn = await t`delete from webauthn_credentials where user_id = ${userId} returning 1`;
  await t`delete from webauthn_registration_challenges where user_id = ${userId}`;
  // Neither link can normally exist here (an OAuth link marks the email verified; a wallet links
  // only to its own `@wallet.invalid` address), but if one does, the new owner did not make it.
  const oauthLinks = await t`delete from oauth_accounts where user_id = ${userId} returning 1`;
  const walletLinks = await t`delete from wallet_accounts where user_id = ${userId} returning 1`;
  return {
    sessions: live?.n ?? 0,
    apiKeys: apiKeys.length,
    webauthnCredentials: webauthn.length,
    oauthLinks: oauthLinks.length,
    walletLinks: walletLinks.length,
  };
}
