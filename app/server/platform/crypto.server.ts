import {
  createCipheriv,
  createDecipheriv,
  createHash,
  randomBytes,
  timingSafeEqual,
} from "node:crypto";
import { env } from "./env.server.ts";
import { secrets } from "./secrets.server.ts";

// Secrets at rest (provider keys, channel tokens, gateway tokens) are sealed with AES-256-GCM.
// The key is SEALING_KEY (64 hex chars; required in production). In development and tests, when
// it is unset, a random key is kept in DATA_DIR/secrets.json (secrets.server.ts).

const VERSION = "v1";
const IV_BYTES = 12;
const TAG_BYTES = 16;

let cachedKey: { source: string; key: Buffer } | undefined;

/** The 32-byte sealing key (from SEALING_KEY, else the local secrets file outside production). */
export function sealingKey(): Buffer {
  const { SEALING_KEY, DATA_DIR } = env();
  const source = SEALING_KEY ? `env:${SEALING_KEY}` : `file:${DATA_DIR}`;
  if (cachedKey?.source === source) return cachedKey.key;
  // secrets() refuses to invent a key in production.
  const key = Buffer.from(secrets().sealingKey, "hex");
  cachedKey = { source, key };
  return key;
}

/** Seals a secret: `v1.<base64url iv|tag|ciphertext>`. */
export function seal(plaintext: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", sealingKey(), iv);
  const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
  const tag = cipher.getAuthTag();
  return `${VERSION}.${Buffer.concat([iv, tag, ciphertext]).toString("base64url")}`;
}

/** Opens a sealed secret; throws when it was tampered with or sealed under another key. */
export function unseal(sealed: string): string {
  const [version, payload] = sealed.split(".");
  if (version !== VERSION || !payload) throw new Error("Unknown sealed-secret format");
  const raw = Buffer.from(payload, "base64url");
  if (raw.length < IV_BYTES + TAG_BYTES) throw new Error("Sealed secret is truncated");
  const decipher = createDecipheriv("aes-256-gcm", sealingKey(), raw.subarray(0, IV_BYTES));
  decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  return Buffer.concat([
    decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)),
    decipher.final(),
  ]).toString("utf8");
}

/** Hex SHA-256, how tokens and API keys are stored. */
export function sha256Hex(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}

/** Constant-time comparison of two strings. */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Tests switch DATA_DIR or SEALING_KEY between cases. */
export function resetSealingKeyCache(): void {
  cachedKey = undefined;
}
