import { createHash, generateKeyPairSync, type KeyObject, sign } from "node:crypto";
import { isoCBOR } from "@simplewebauthn/server/helpers";

// A software WebAuthn authenticator with one P-256 key: the registration attestation ("none")
// a browser would send, and assertions over a verification challenge.

export const APP = "https://app.example.test";
export const RP_ID = "app.example.test";

export function softAuthenticator(label: string, rpId = RP_ID) {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const jwk = publicKey.export({ format: "jwk" });
  const cose = isoCBOR.encode(
    new Map<number, number | Uint8Array>([
      [1, 2],
      [3, -7],
      [-1, 1],
      [-2, Buffer.from(jwk.x!, "base64url")],
      [-3, Buffer.from(jwk.y!, "base64url")],
    ]),
  );
  const credentialId = Buffer.from(`cred-${label}`);
  const id = credentialId.toString("base64url");
  const rpIdHash = createHash("sha256").update(rpId).digest();
  return {
    id,
    /** The COSE public key, as stored for a registered authenticator. */
    cose,
    privateKey: privateKey as KeyObject,
    attestation(challenge: string, origin = APP) {
      const idLength = Buffer.alloc(2);
      idLength.writeUInt16BE(credentialId.length);
      const authData = Buffer.concat([
        rpIdHash,
        Buffer.from([0x41]), // user present + attested credential data
        Buffer.alloc(4), // counter 0
        Buffer.alloc(16), // AAGUID
        idLength,
        credentialId,
        Buffer.from(cose),
      ]);
      const attestationObject = isoCBOR.encode(
        new Map<string, unknown>([
          ["fmt", "none"],
          ["attStmt", new Map()],
          ["authData", new Uint8Array(authData)],
        ]) as never,
      );
      const clientDataJSON = Buffer.from(
        JSON.stringify({ type: "webauthn.create", challenge, origin }),
      );
      return {
        id,
        rawId: id,
        type: "public-key",
        clientExtensionResults: {},
        response: {
          clientDataJSON: clientDataJSON.toString("base64url"),
          attestationObject: Buffer.from(attestationObject).toString("base64url"),
          transports: ["usb"],
        },
      };
    },
    /** A `webauthn` verification proof: an assertion over `challengeText` (UTF-8). */
    assertion(challengeText: string, counter: number, origin = APP) {
      const counterBytes = Buffer.alloc(4);
      counterBytes.writeUInt32BE(counter);
      const authenticatorData = Buffer.concat([rpIdHash, Buffer.from([0x05]), counterBytes]);
      const clientDataJSON = Buffer.from(
        JSON.stringify({
          type: "webauthn.get",
          challenge: Buffer.from(challengeText, "utf8").toString("base64url"),
          origin,
        }),
      );
      const signed = Buffer.concat([
        authenticatorData,
        createHash("sha256").update(clientDataJSON).digest(),
      ]);
      return JSON.stringify({
        id,
        rawId: id,
        type: "public-key",
        clientExtensionResults: {},
        response: {
          authenticatorData: authenticatorData.toString("base64url"),
          clientDataJSON: clientDataJSON.toString("base64url"),
          signature: sign("sha256", signed, privateKey).toString("base64url"),
        },
      });
    },
  };
}
