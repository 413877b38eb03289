import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync } from "node:crypto";

// The platform's Ed25519 device identity towards a gateway (OpenClaw's device auth): the device
// id is the sha256 of the raw public key; the client signs the v3 payload with it at connect.

const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

export interface DeviceIdentity {
  /** sha256 hex of the raw 32-byte public key (OpenClaw's device id). */
  deviceId: string;
  /** Raw public key, base64url. */
  publicKey: string;
  /** PKCS#8 PEM (kept sealed at rest). */
  privateKeyPem: string;
}

export function generateDeviceIdentity(): DeviceIdentity {
  const { privateKey } = generateKeyPairSync("ed25519");
  return deviceIdentityFromPrivateKey(
    privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
  );
}

export function deviceIdentityFromPrivateKey(privateKeyPem: string): DeviceIdentity {
  const spki = createPublicKey(createPrivateKey(privateKeyPem)).export({
    type: "spki",
    format: "der",
  });
  const raw = spki.subarray(ED25519_SPKI_PREFIX.length);
  return {
    deviceId: createHash("sha256").update(raw).digest("hex"),
    publicKey: raw.toString("base64url"),
    privateKeyPem,
  };
}

/** The v3 device-auth payload (buildDeviceAuthPayloadV3 in OpenClaw's gateway client). */
export function deviceAuthPayloadV3(p: {
  deviceId: string;
  clientId: string;
  clientMode: string;
  role: string;
  scopes: string[];
  signedAtMs: number;
  token: string;
  nonce: string;
  platform: string;
  deviceFamily: string;
}): string {
  return [
    "v3",
    p.deviceId,
    p.clientId,
    p.clientMode,
    p.role,
    p.scopes.join(","),
    String(p.signedAtMs),
    p.token,
    p.nonce,
    p.platform.trim().toLowerCase(),
    p.deviceFamily.trim().toLowerCase(),
  ].join("|");
}
