import { randomBytes } from "node:crypto";
import { db } from "../platform/db.server.ts";

// Server-issued SIWE nonces: random, short-lived, single use. `consumeNonce` is the atomic
// check-and-set, so two concurrent sign-ins with one nonce cannot both pass.
// docs/decisions/0051-wallet-sign-in.md

export const NONCE_TTL_SECONDS = 10 * 60;

/**
 * 128 bits from the OS CSPRNG, as 32 hex digits (EIP-4361: at least 8 alphanumerics). Not viem's
 * `generateSiweNonce`: it slides a window over a Math.random buffer, so each nonce is the
 * previous one shifted by a digit.
 */
export const newSiweNonce = (): string => randomBytes(16).toString("hex");

export async function issueNonce(): Promise<{ nonce: string; expiresAt: Date }> {
  const nonce = newSiweNonce();
  const [row] = await db()<{ expires_at: Date }[]>`
    insert into siwe_nonces (nonce, expires_at)
    values (${nonce}, now() + make_interval(secs => ${NONCE_TTL_SECONDS}))
    returning expires_at`;
  // Expired nonces are useless: drop a few old ones on the way (no job needed).
  await db()`
    delete from siwe_nonces where nonce in (
      select nonce from siwe_nonces where expires_at < now() - interval '1 day' limit 100)`;
  return { nonce, expiresAt: row!.expires_at };
}

/** True when the nonce was issued, is unexpired and unused (without using it). */
export async function isNonceUsable(nonce: string): Promise<boolean> {
  const [row] = await db()`
    select 1 from siwe_nonces where nonce = ${nonce} and used_at is null and expires_at > now()`;
  return row !== undefined;
}

/** Marks the nonce used; false when it was unknown, expired or already used. */
export async function consumeNonce(nonce: string): Promise<boolean> {
  const rows = await db()`
    update siwe_nonces set used_at = now()
    where nonce = ${nonce} and used_at is null and expires_at > now()
    returning nonce`;
  return rows.length === 1;
}
