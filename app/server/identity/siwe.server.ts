import { type Address, type Hex, isErc6492Signature, isHex, recoverMessageAddress } from "viem";
import { parseSiweMessage, type SiweMessage } from "viem/siwe";
import { toUser, type User, type UserRow } from "../accounts/model.server.ts";
import { revokeUnprovenAccess } from "../accounts/takeover.server.ts";
import { createUser, findUserByEmail } from "../accounts/users.server.ts";
import { refuseSignIn } from "../organisations/sso-enforcement.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { checksum } from "./addresses.server.ts";
import { assertChainReachable, publicClient } from "./chain.server.ts";
import { consumeNonce, isNonceUsable } from "./nonces.server.ts";

// Sign-In with Ethereum (EIP-4361) on Base. The message must name our domain (APP_URL's host),
// the configured chain (8453 = 0x2105), a nonce we issued and have not seen used, and be inside
// its issuedAt / notBefore / expirationTime window. The signature is checked with viem on the
// chain, so EOAs, deployed ERC-1271 wallets and not-yet-deployed ERC-6492 wallets all work.
// docs/decisions/0051-wallet-sign-in.md

/** Clock skew tolerated on issuedAt / notBefore. */
const SKEW_MS = 60_000;

/** The email a wallet-only account gets: `<lower-case address>@wallet.invalid` (RFC 2606). */
export const walletEmail = (address: string) => `${address.toLowerCase()}@wallet.invalid`;

const unauthorized = (message: string) => new DomainError(401, message);

export interface WalletSignIn {
  user: User;
  address: Address;
  created: boolean;
}

export async function verifySiwe(
  message: string,
  signature: string,
  now = new Date(),
): Promise<{ address: Address; fields: Partial<SiweMessage> }> {
  const e = env();
  let fields: Partial<SiweMessage>;
  try {
    fields = parseSiweMessage(message);
  } catch {
    throw unauthorized("Malformed SIWE message");
  }
  if (!fields.address || !fields.domain || !fields.nonce || !fields.chainId || !fields.uri) {
    throw unauthorized("Malformed SIWE message");
  }
  if (fields.version !== "1") throw unauthorized("Unsupported SIWE message version");
  if (fields.domain !== new URL(e.APP_URL).host) throw unauthorized("SIWE domain mismatch");
  if (fields.chainId !== e.BASE_CHAIN_ID) {
    throw unauthorized(`SIWE message must be for chain id ${e.BASE_CHAIN_ID}`);
  }
  const t = now.getTime();
  if (fields.issuedAt && fields.issuedAt.getTime() > t + SKEW_MS) {
    throw unauthorized("SIWE message issued in the future");
  }
  if (fields.notBefore && fields.notBefore.getTime() > t + SKEW_MS) {
    throw unauthorized("SIWE message not yet valid");
  }
  if (fields.expirationTime && fields.expirationTime.getTime() <= t) {
    throw unauthorized("SIWE message expired");
  }
  if (!(await isNonceUsable(fields.nonce))) throw unauthorized("Unknown or already used nonce");
  if (!isHex(signature) || signature.length < 132) throw unauthorized("Malformed signature");
  const address = checksum(fields.address);
  if (!(await signatureMatches(address, message, signature))) {
    throw unauthorized("Signature verification failed");
  }
  if (!(await consumeNonce(fields.nonce))) throw unauthorized("Unknown or already used nonce");
  return { address, fields };
}

/**
 * EOA signatures are checked locally (no RPC needed); anything else (ERC-1271, ERC-6492) on the
 * chain. A chain outage is a 502, never "bad signature".
 */
export async function signatureMatches(
  address: Address,
  message: string,
  signature: Hex,
): Promise<boolean> {
  if (signature.length === 132 && !isErc6492Signature(signature)) {
    try {
      const recovered = await recoverMessageAddress({ message, signature });
      if (recovered === address) return true;
    } catch {
      // not a valid ECDSA signature: may still be a contract wallet's
    }
  }
  await assertChainReachable(502);
  try {
    return await publicClient().verifyMessage({ address, message, signature });
  } catch (error) {
    logger().info({ err: error, address }, "wallet signature check threw");
    return false;
  }
}

/**
 * The user behind a verified wallet: the linked one, else the user with the wallet-derived
 * email (linked now), else a new user. Same pattern as OAuth linking (accounts/oauth.server.ts).
 */
export async function userForWallet(address: Address): Promise<WalletSignIn> {
  const sql = db();
  const chainId = env().BASE_CHAIN_ID;
  const [linked] = await sql<UserRow[]>`
    update wallet_accounts w set last_sign_in_at = now() from users u
    where w.address = ${address} and u.id = w.user_id
    returning u.*`;
  if (linked) {
    // A linked account at a domain whose organisation requires SSO (docs/decisions/0212).
    const refused = linked.email
      ? await refuseSignIn(linked.email, linked.id, "wallet")
      : undefined;
    if (refused) throw refused;
    await recordAudit({
      action: "auth.signin",
      actor: { type: "user", id: linked.id, userId: linked.id },
      details: { method: "wallet", address },
    });
    return { user: toUser(linked), address, created: false };
  }
  return sql.begin(async (t) => {
    const existing = await findUserByEmail(walletEmail(address), t);
    let user: User;
    let created = false;
    if (existing) {
      user = toUser(existing);
      if (existing.password_hash) {
        // Nobody can receive mail at *.invalid: whoever registered this address with a password
        // never proved they hold the wallet. The wallet owner gets the account; the password,
        // sessions, API keys and authenticators of the registrant stop working (docs/decisions/0051).
        await revokeUnprovenAccess(user.id, t);
        user = { ...user, hasPassword: false };
      }
      logger().info({ userId: user.id, address }, "wallet linked to an existing user");
    } else {
      user = await createUser(
        { email: walletEmail(address), name: `${address.slice(0, 6)}…${address.slice(-4)}` },
        t,
      );
      created = true;
    }
    await t`
      insert into wallet_accounts (address, user_id, chain_id) values (${address}, ${user.id}, ${chainId})
      on conflict (address) do nothing`;
    const actor = { type: "user" as const, id: user.id, userId: user.id };
    await recordAudit({ action: "wallet.linked", actor, target: address, details: { created } }, t);
    await recordAudit({ action: "auth.signin", actor, details: { method: "wallet", address } }, t);
    return { user, address, created };
  }) as Promise<WalletSignIn>;
}

export async function signInWithWallet(message: string, signature: string): Promise<WalletSignIn> {
  const { address } = await verifySiwe(message, signature);
  return userForWallet(address);
}

/** Wallets linked to a user (checksummed). */
export async function linkedWallets(userId: string): Promise<Address[]> {
  const rows = await db()<{ address: Address }[]>`
    select address from wallet_accounts where user_id = ${userId} order by created_at`;
  return rows.map((r) => r.address);
}
