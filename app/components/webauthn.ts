// Browser side of WebAuthn: the JSON options the server sends ↔ the binary the browser API
// takes, and back. Used by the security-keys panel (registration) and by agent verification
// (an assertion over a platform challenge).

const toBytes = (b64url: string): Uint8Array<ArrayBuffer> => {
  const b64 = b64url.replace(/-/g, "+").replace(/_/g, "/");
  const raw = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
  const out = new Uint8Array(new ArrayBuffer(raw.length));
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
};

const toB64url = (buffer: ArrayBuffer): string => {
  let s = "";
  for (const byte of new Uint8Array(buffer)) s += String.fromCharCode(byte);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
};

export const webauthnSupported = () =>
  typeof window !== "undefined" && typeof window.PublicKeyCredential === "function";

interface CreationOptionsJSON {
  challenge: string;
  rp: { id?: string; name: string };
  user: { id: string; name: string; displayName: string };
  pubKeyCredParams: PublicKeyCredentialParameters[];
  timeout?: number;
  excludeCredentials?: { id: string; type?: string; transports?: string[] }[];
  authenticatorSelection?: AuthenticatorSelectionCriteria;
  attestation?: AttestationConveyancePreference;
}

/** navigator.credentials.create with the server's options; the attestation as JSON. */
export async function createCredential(options: CreationOptionsJSON) {
  const credential = (await navigator.credentials.create({
    publicKey: {
      ...options,
      challenge: toBytes(options.challenge),
      user: { ...options.user, id: toBytes(options.user.id) },
      excludeCredentials: (options.excludeCredentials ?? []).map((c) => ({
        type: "public-key" as const,
        id: toBytes(c.id),
        transports: c.transports as AuthenticatorTransport[] | undefined,
      })),
    },
  })) as PublicKeyCredential | null;
  if (!credential) throw new Error("The browser created no credential");
  const response = credential.response as AuthenticatorAttestationResponse;
  return {
    id: credential.id,
    rawId: toB64url(credential.rawId),
    type: "public-key",
    clientExtensionResults: credential.getClientExtensionResults(),
    authenticatorAttachment: credential.authenticatorAttachment ?? undefined,
    response: {
      clientDataJSON: toB64url(response.clientDataJSON),
      attestationObject: toB64url(response.attestationObject),
      transports: response.getTransports?.() ?? [],
    },
  };
}

/** An assertion over `challengeText` (its UTF-8 bytes) by one of `credentialIds`, as JSON. */
export async function assertChallenge(challengeText: string, credentialIds: string[]) {
  const credential = (await navigator.credentials.get({
    publicKey: {
      challenge: new TextEncoder().encode(challengeText),
      allowCredentials: credentialIds.map((id) => ({
        type: "public-key" as const,
        id: toBytes(id),
      })),
      userVerification: "preferred",
    },
  })) as PublicKeyCredential | null;
  if (!credential) throw new Error("The browser returned no assertion");
  const response = credential.response as AuthenticatorAssertionResponse;
  return JSON.stringify({
    id: credential.id,
    rawId: toB64url(credential.rawId),
    type: "public-key",
    clientExtensionResults: credential.getClientExtensionResults(),
    response: {
      authenticatorData: toB64url(response.authenticatorData),
      clientDataJSON: toB64url(response.clientDataJSON),
      signature: toB64url(response.signature),
      userHandle: response.userHandle ? toB64url(response.userHandle) : undefined,
    },
  });
}
