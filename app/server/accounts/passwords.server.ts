import { hash, verify } from "@node-rs/argon2";
import { DomainError } from "../platform/errors.server.ts";
import { attempt } from "../platform/rate-limit.server.ts";

// argon2id with the library's defaults (m=19456 KiB, t=2, p=1: OWASP's recommended minimum).
export const hashPassword = (password: string) => hash(password);

// A hash to verify against when the account does not exist, so an unknown email costs the same
// time as a wrong password.
let dummy: Promise<string> | undefined;

export async function verifyPassword(stored: string | null, password: string): Promise<boolean> {
  if (!stored) {
    dummy ??= hash("not-a-real-password-just-for-timing");
    await verify(await dummy, password).catch(() => false);
    return false;
  }
  return verify(stored, password).catch(() => false);
}

/** The failure counter of an account's password checks (scope signin-failures), by email. */
export const failureKey = (email: string) => `email:${email.trim().toLowerCase()}`;

/**
 * Counts a password check for `email` before it runs (sign-in, and the current password of a
 * password change): 429 with Retry-After when its budget is spent. A success `forgive`s it.
 */
export async function countPasswordAttempt(email: string): Promise<void> {
  const wait = await attempt("signin-failures", failureKey(email));
  if (wait > 0) {
    throw new DomainError(429, "Too many failed password attempts; try again later", {
      retryAfter: wait,
    });
  }
}
