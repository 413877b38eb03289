import { hash, verify } from "@node-rs/argon2";

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
