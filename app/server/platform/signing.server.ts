import {
  createPrivateKey,
  createPublicKey,
  hkdfSync,
  type KeyObject,
  sign,
  verify,
} from "node:crypto";
import { sealingKey } from "./crypto.server.ts";
import { env } from "./env.server.ts";

// The platform's Ed25519 signing key, derived from the sealing key (HKDF), so an installation
// has one without more configuration. Archives it exports carry its public key; another
// installation accepts them when that key is its own or listed in EXPORT_TRUSTED_KEYS.

const PKCS8_ED25519_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");

let cached: { seal: Buffer; privateKey: KeyObject; publicKey: string } | undefined;

function keys() {
  const seal = sealingKey();
  if (cached?.seal === seal) return cached;
  const seed = Buffer.from(
    hkdfSync("sha256", seal, Buffer.alloc(0), "agent-platform export signing v1", 32),
  );
  const privateKey = createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519_PREFIX, seed]),
    format: "der",
    type: "pkcs8",
  });
  const raw = createPublicKey(privateKey).export({ format: "der", type: "spki" }).subarray(-32);
  cached = { seal, privateKey, publicKey: Buffer.from(raw).toString("base64url") };
  return cached;
}

/** This installation's public key (base64url of the raw 32 bytes). */
export const platformPublicKey = (): string => keys().publicKey;

/** Ed25519 signature of `data`, base64url. */
export const signBytes = (data: Buffer): string =>
  sign(null, data, keys().privateKey).toString("base64url");

/** Keys whose signatures this installation accepts: its own and EXPORT_TRUSTED_KEYS. */
export const trustedKeys = (): string[] => [platformPublicKey(), ...env().EXPORT_TRUSTED_KEYS];

/** True when `signature` is `publicKey`'s over `data` (false for any malformed input). */
export function verifyBytes(data: Buffer, signature: string, publicKey: string): boolean {
  try {
    const raw = Buffer.from(publicKey, "base64url");
    if (raw.length !== 32) return false;
    const key = createPublicKey({
      key: Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), raw]),
      format: "der",
      type: "spki",
    });
    return verify(null, data, key, Buffer.from(signature, "base64url"));
  } catch {
    return false;
  }
}
