import { randomBytes } from "node:crypto";
import {
  generateRegistrationOptions,
  type RegistrationResponseJSON,
  verifyRegistrationResponse,
} from "@simplewebauthn/server";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { addWebauthnCredential } from "./verification.server.ts";

// Registering an authenticator (security key, passkey) on the user's account: the options the
// browser passes to navigator.credentials.create, then the attestation it returns, checked with
// @simplewebauthn/server against a single-use challenge. Registered authenticators sign the
// `webauthn` agent-verification proofs (verification.server.ts). docs/decisions/0056-webauthn-registration.md

export const REGISTRATION_TTL_SECONDS = 5 * 60;

const relyingParty = () => {
  const app = new URL(env().APP_URL);
  return { id: app.hostname, origin: app.origin, name: "Agent Platform" };
};

export interface WebauthnCredentialView {
  id: string;
  name: string;
  transports: string[];
  createdAt: string;
}

export async function listWebauthnCredentials(userId: string): Promise<WebauthnCredentialView[]> {
  const rows = await db()<
    { id: string; name: string; transports: string[] | null; created_at: Date }[]
  >`select id, name, transports, created_at from webauthn_credentials
    where user_id = ${userId} order by created_at`;
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    transports: r.transports ?? [],
    createdAt: r.created_at.toISOString(),
  }));
}

/** Options for navigator.credentials.create; the challenge is stored for one use. */
export async function startWebauthnRegistration(user: { id: string; email: string }) {
  const rp = relyingParty();
  const existing = await listWebauthnCredentials(user.id);
  const options = await generateRegistrationOptions({
    rpName: rp.name,
    rpID: rp.id,
    userName: user.email,
    userID: new TextEncoder().encode(user.id),
    // Our own CSPRNG bytes rather than the library's default source (one source for every token).
    challenge: new Uint8Array(randomBytes(32)),
    attestationType: "none",
    excludeCredentials: existing.map((c) => ({ id: c.id })),
    authenticatorSelection: { residentKey: "preferred", userVerification: "preferred" },
  });
  await db()`
    insert into webauthn_registration_challenges (challenge, user_id, expires_at)
    values (${options.challenge}, ${user.id},
            now() + make_interval(secs => ${REGISTRATION_TTL_SECONDS}))`;
  return options;
}

/** Checks the browser's attestation and stores the authenticator; 400 when it does not check. */
export async function finishWebauthnRegistration(
  userId: string,
  response: RegistrationResponseJSON,
  name = "Security key",
): Promise<WebauthnCredentialView> {
  const rp = relyingParty();
  let consumed: string | undefined;
  let verification: Awaited<ReturnType<typeof verifyRegistrationResponse>>;
  try {
    verification = await verifyRegistrationResponse({
      response,
      expectedChallenge: async (challenge) => {
        const rows = await db()`
          delete from webauthn_registration_challenges
          where challenge = ${challenge} and user_id = ${userId} and expires_at > now()
          returning 1`;
        if (rows.length === 1) consumed = challenge;
        return rows.length === 1;
      },
      expectedOrigin: rp.origin,
      expectedRPID: rp.id,
      requireUserVerification: false,
    });
  } catch (error) {
    throw new DomainError(400, `Registration does not check: ${(error as Error).message}`);
  }
  if (!verification.verified || !verification.registrationInfo || !consumed) {
    throw new DomainError(400, "Registration does not check");
  }
  const { credential } = verification.registrationInfo;
  const added = await addWebauthnCredential(userId, {
    id: credential.id,
    publicKey: credential.publicKey,
    counter: credential.counter,
    transports: credential.transports ?? response.response.transports ?? [],
    name,
  });
  if (!added) throw new DomainError(409, "This authenticator is already registered");
  const [view] = (await listWebauthnCredentials(userId)).filter((c) => c.id === credential.id);
  return view as WebauthnCredentialView;
}

/** Removes one of the user's authenticators; 404 when it is not theirs. */
export async function removeWebauthnCredential(userId: string, id: string): Promise<void> {
  const rows = await db()`
    delete from webauthn_credentials where id = ${id} and user_id = ${userId} returning 1`;
  if (rows.length === 0) throw new DomainError(404, "Authenticator not found");
}
