import { createCipheriv, createDecipheriv, type DecipherGCM, randomBytes } from "node:crypto";
import type { Readable } from "node:stream";
import { seal, unseal } from "./crypto.server.ts";

// Large payloads (backups) encrypted at rest as a stream: AES-256-GCM under a fresh data key per
// payload, the data key sealed by the platform's sealing key and carried in the header, so a
// rotated sealing key only re-seals headers. Layout:
//   "AGSS" | 0x01 | uint16 length of the sealed key | sealed key (ascii) | 12-byte IV |
//   ciphertext | 16-byte GCM tag
// GCM authenticates only at the end: readers must treat the plaintext as untrusted until the
// stream finished without error (restore writes it to a fresh place and commits afterwards).

const MAGIC = Buffer.from("AGSS\x01", "latin1");
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class SealedStreamError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SealedStreamError";
  }
}

/** Encrypts `source` chunk by chunk; yields the sealed stream. */
export async function* sealStream(source: AsyncIterable<Buffer | string>): AsyncGenerator<Buffer> {
  const dataKey = randomBytes(32);
  const sealedKey = Buffer.from(seal(dataKey.toString("hex")), "ascii");
  const iv = randomBytes(IV_BYTES);
  const length = Buffer.alloc(2);
  length.writeUInt16BE(sealedKey.length);
  yield Buffer.concat([MAGIC, length, sealedKey, iv]);
  const cipher = createCipheriv("aes-256-gcm", dataKey, iv);
  for await (const chunk of source) {
    const out = cipher.update(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
    if (out.length > 0) yield out;
  }
  const last = cipher.final();
  if (last.length > 0) yield last;
  yield cipher.getAuthTag();
}

/** Decrypts a sealed stream; throws SealedStreamError when it is not one, truncated or altered. */
export async function* openStream(
  source: Readable | AsyncIterable<Buffer>,
): AsyncGenerator<Buffer> {
  let pending: Buffer = Buffer.alloc(0);
  let decipher: DecipherGCM | undefined;
  for await (const chunk of source as AsyncIterable<Buffer>) {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    if (!decipher) {
      if (pending.length < MAGIC.length + 2) continue;
      if (!pending.subarray(0, MAGIC.length).equals(MAGIC)) {
        throw new SealedStreamError("not an encrypted backup (unknown header)");
      }
      const keyLength = pending.readUInt16BE(MAGIC.length);
      const headerLength = MAGIC.length + 2 + keyLength + IV_BYTES;
      if (pending.length < headerLength) continue;
      let dataKey: Buffer;
      try {
        const sealedKey = pending.subarray(MAGIC.length + 2, MAGIC.length + 2 + keyLength);
        dataKey = Buffer.from(unseal(sealedKey.toString("ascii")), "hex");
      } catch {
        throw new SealedStreamError("the backup's key cannot be opened with this sealing key");
      }
      const iv = pending.subarray(headerLength - IV_BYTES, headerLength);
      decipher = createDecipheriv("aes-256-gcm", dataKey, iv) as DecipherGCM;
      pending = pending.subarray(headerLength);
    }
    // The last TAG_BYTES may be the tag: hold them back until the source ends.
    if (pending.length > TAG_BYTES) {
      const out = decipher.update(pending.subarray(0, pending.length - TAG_BYTES));
      pending = pending.subarray(pending.length - TAG_BYTES);
      if (out.length > 0) yield out;
    }
  }
  if (!decipher || pending.length < TAG_BYTES)
    throw new SealedStreamError("the backup is truncated");
  decipher.setAuthTag(pending);
  let last: Buffer;
  try {
    last = decipher.final();
  } catch {
    throw new SealedStreamError("the backup failed authentication (altered or truncated)");
  }
  if (last.length > 0) yield last;
}
