import { hash, randomBytes } from "node:crypto";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

/** A random lower-case alphanumeric string of `length` characters (about 5.2 bits each). */
export function randomAlphanumeric(length: number, alphabet = ALPHABET): string {
  // Rejection sampling keeps every character equally likely.
  const limit = 256 - (256 % alphabet.length);
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < limit) out += alphabet[byte % alphabet.length];
      if (out.length === length) break;
    }
  }
  return out;
}

/** `usr_…`, `ses_…`, `key_…`, `msg_…`, …: a prefix and 20 random characters (~103 bits). */
export const newId = (
  prefix: "usr" | "org" | "inv" | "ses" | "key" | "msg" | "spl" | "exe" | "bkg",
) => `${prefix}_${randomAlphanumeric(20)}`;

// One-shot hashing: about half the cost of createHash().update().digest() per call.
export const sha256 = (value: string): Buffer => hash("sha256", value, "buffer");

/** The SHA-256 of `value` in hex (credential-cache keys: no Buffer made for them). */
export const sha256Hex = (value: string): string => hash("sha256", value, "hex");

/** A random token of `bytes` bytes, base64url. */
export const randomToken = (bytes = 32) => randomBytes(bytes).toString("base64url");
