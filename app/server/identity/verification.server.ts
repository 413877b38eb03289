import { randomBytes } from "node:crypto";
import {
  type AuthenticationResponseJSON,
  verifyAuthenticationResponse,
} from "@simplewebauthn/server";
import { type Address, type Hex, isHex, stringToHex, zeroAddress, zeroHash } from "viem";
import { namehash, normalize } from "viem/ens";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { checksum } from "./addresses.server.ts";
import { assertChainReachable, publicClient } from "./chain.server.ts";
import { linkedWallets, signatureMatches } from "./siwe.server.ts";

// Agent verification proofs (the contract's Verification record). Four kinds:
//   eas       an EAS attestation on the chain: exists, unrevoked, unexpired, and names the agent
//             (its id in the attestation data, or the agent's own address as recipient) or one
//             of its owner's linked wallets (recipient)
//   exchange  a signature over a platform challenge by one of the owner's linked wallets
//   ens       a signature over the challenge by `walletAddress`, whose primary name (reverse
//             record in the chain's ENS-compatible registry) resolves back to it
//   webauthn  an assertion over the challenge by one of the owner's registered authenticators
// Challenges are issued per agent, expire after 10 minutes and are used once. A proof that does
// not check is a 400 and nothing is stored. The agents table does not exist yet: agent ids are
// plain text here (docs/decisions/0055-agent-verification.md); the /api/agents/:id/verify routes
// belong to the agents issue and call these functions after checking ownership.

export const verificationTypes = ["eas", "exchange", "ens", "webauthn"] as const;
export type VerificationType = (typeof verificationTypes)[number];
export const CHALLENGE_TTL_SECONDS = 10 * 60;

export interface VerificationRecord {
  verified: boolean;
  verificationType: VerificationType | null;
  attestationUid: string | null;
  verifierAddress: string | null;
  verifiedAt: string | null;
  metadata: Record<string, unknown> | null;
}

export type Proof =
  | { verificationType: "eas"; attestationUid: string }
  | { verificationType: "exchange"; signature: string }
  | { verificationType: "ens"; signature: string; walletAddress: string }
  | { verificationType: "webauthn"; signature: string };

export interface ProofSubject {
  agentId: string;
  ownerId: string;
  /** The agent's own wallet address, when it has one. */
  agentAddress?: string | undefined;
}

/** ENS resolution, injectable (tests; a chain without ENS). */
export interface EnsResolver {
  /** The primary name of an address (reverse record), or null. */
  nameOf(address: Address): Promise<string | null>;
  /** The address a name resolves to, or null. */
  addressOf(name: string): Promise<Address | null>;
}

export interface CheckedProof {
  verificationType: VerificationType;
  attestationUid: string | null;
  verifierAddress: string | null;
  metadata: Record<string, unknown> | null;
  /** The challenge the proof used (consumed when the proof is stored). */
  challenge?: string;
}

type Transports = Parameters<typeof verifyAuthenticationResponse>[0]["credential"]["transports"];

const invalid = (message: string) => new DomainError(400, message);

// ---------------------------------------------------------------- challenges

export async function createVerificationChallenge(
  agentId: string,
): Promise<{ challenge: string; expiresAt: Date }> {
  const { APP_URL } = env();
  const challenge = [
    `${new URL(APP_URL).host} wants you to prove control of agent ${agentId}.`,
    `Nonce: ${randomBytes(16).toString("hex")}`,
    `Issued At: ${new Date().toISOString()}`,
  ].join("\n");
  const [row] = await db()<{ expires_at: Date }[]>`
    insert into agent_verification_challenges (agent_id, challenge, expires_at)
    values (${agentId}, ${challenge}, now() + make_interval(secs => ${CHALLENGE_TTL_SECONDS}))
    returning expires_at`;
  return { challenge, expiresAt: row!.expires_at };
}

async function openChallenges(agentId: string): Promise<string[]> {
  const rows = await db()<{ challenge: string }[]>`
    select challenge from agent_verification_challenges
    where agent_id = ${agentId} and used_at is null and expires_at > now()
    order by created_at desc limit 5`;
  return rows.map((r) => r.challenge);
}

async function consumeChallenge(agentId: string, challenge: string): Promise<boolean> {
  const rows = await db()`
    update agent_verification_challenges set used_at = now()
    where agent_id = ${agentId} and challenge = ${challenge} and used_at is null and expires_at > now()
    returning 1`;
  return rows.length === 1;
}

/** The first (address, challenge) pair the signature checks for. */
async function signedChallenge(
  candidates: Address[],
  challenges: string[],
  signature: string,
): Promise<{ address: Address; challenge: string } | undefined> {
  if (!isHex(signature) || signature.length < 132) throw invalid("signature: malformed");
  const sig = signature as Hex;
  for (const challenge of challenges) {
    for (const address of candidates) {
      if (await signatureMatches(address, challenge, sig)) return { address, challenge };
    }
  }
  return undefined;
}

// ---------------------------------------------------------------- the four checkers

const easAbi = [
  {
    type: "function",
    name: "getAttestation",
    stateMutability: "view",
    inputs: [{ name: "uid", type: "bytes32" }],
    outputs: [
      {
        name: "",
        type: "tuple",
        components: [
          { name: "uid", type: "bytes32" },
          { name: "schema", type: "bytes32" },
          { name: "time", type: "uint64" },
          { name: "expirationTime", type: "uint64" },
          { name: "revocationTime", type: "uint64" },
          { name: "refUID", type: "bytes32" },
          { name: "recipient", type: "address" },
          { name: "attester", type: "address" },
          { name: "revocable", type: "bool" },
          { name: "data", type: "bytes" },
        ],
      },
    ],
  },
] as const;

export async function checkEasProof(
  subject: ProofSubject,
  attestationUid: string,
  now = new Date(),
): Promise<CheckedProof> {
  if (!/^0x[0-9a-fA-F]{64}$/.test(attestationUid)) {
    throw invalid("attestationUid: must be 0x followed by 64 hex characters");
  }
  const uid = attestationUid.toLowerCase() as Hex;
  await assertChainReachable(502);
  let a: Awaited<ReturnType<typeof readAttestation>>;
  try {
    a = await readAttestation(uid);
  } catch (error) {
    logger().warn({ err: error, uid }, "EAS getAttestation failed");
    throw new DomainError(502, "Could not read the attestation from the chain");
  }
  if (a.uid === zeroHash) throw invalid("Attestation not found");
  if (a.revocationTime !== 0n) throw invalid("Attestation has been revoked");
  if (a.expirationTime !== 0n && a.expirationTime <= BigInt(Math.floor(now.getTime() / 1000))) {
    throw invalid("Attestation has expired");
  }
  const recipient = checksum(a.recipient);
  const wallets = await linkedWallets(subject.ownerId);
  const agentAddress = subject.agentAddress ? checksum(subject.agentAddress) : undefined;
  const namesAgentInData = a.data.toLowerCase().includes(stringToHex(subject.agentId).slice(2));
  const names = wallets.includes(recipient) || recipient === agentAddress || namesAgentInData;
  if (!names) throw invalid("Attestation names neither the agent nor its owner's wallet");
  return {
    verificationType: "eas",
    attestationUid: uid,
    verifierAddress: checksum(a.attester),
    metadata: {
      schema: a.schema,
      recipient,
      attester: checksum(a.attester),
      time: Number(a.time),
      easContract: checksum(env().EAS_CONTRACT_ADDRESS),
      chainId: env().BASE_CHAIN_ID,
    },
  };
}

function readAttestation(uid: Hex) {
  return publicClient().readContract({
    address: checksum(env().EAS_CONTRACT_ADDRESS),
    abi: easAbi,
    functionName: "getAttestation",
    args: [uid],
  });
}

export async function checkExchangeProof(
  subject: ProofSubject,
  signature: string,
): Promise<CheckedProof> {
  const wallets = await linkedWallets(subject.ownerId);
  if (wallets.length === 0)
    throw invalid("The owner has no linked wallet (sign in with Ethereum first)");
  const challenges = await openChallenges(subject.agentId);
  if (challenges.length === 0) throw invalid("No open verification challenge for this agent");
  const hit = await signedChallenge(wallets, challenges, signature);
  if (!hit) throw invalid("signature: not a signature of the challenge by the owner's wallet");
  return {
    verificationType: "exchange",
    attestationUid: null,
    verifierAddress: hit.address,
    metadata: { wallet: hit.address },
    challenge: hit.challenge,
  };
}

export async function checkEnsProof(
  subject: ProofSubject,
  signature: string,
  walletAddress: string,
  resolver: EnsResolver,
): Promise<CheckedProof> {
  if (!/^0x[0-9a-fA-F]{40}$/.test(walletAddress)) {
    throw invalid("walletAddress: must be an Ethereum address");
  }
  const wallet = checksum(walletAddress);
  const challenges = await openChallenges(subject.agentId);
  if (challenges.length === 0) throw invalid("No open verification challenge for this agent");
  const hit = await signedChallenge([wallet], challenges, signature);
  if (!hit) throw invalid("signature: not a signature of the challenge by walletAddress");
  let name: string | null;
  let forward: Address | null;
  try {
    name = await resolver.nameOf(wallet);
    forward = name ? await resolver.addressOf(name) : null;
  } catch (error) {
    logger().warn({ err: error }, "ENS resolution failed");
    throw new DomainError(502, "ENS resolution failed");
  }
  if (!name) throw invalid("walletAddress has no ENS name");
  if (!forward || checksum(forward) !== wallet) {
    throw invalid("The ENS name does not resolve to walletAddress");
  }
  return {
    verificationType: "ens",
    attestationUid: null,
    verifierAddress: wallet,
    metadata: { ensName: name },
    challenge: hit.challenge,
  };
}

export async function checkWebauthnProof(
  subject: ProofSubject,
  signature: string,
): Promise<CheckedProof> {
  let response: AuthenticationResponseJSON;
  try {
    response = JSON.parse(signature) as AuthenticationResponseJSON;
  } catch {
    throw invalid("signature: must be the authenticator's assertion (AuthenticationResponseJSON)");
  }
  if (typeof response?.id !== "string" || typeof response.response !== "object") {
    throw invalid("signature: must be the authenticator's assertion (AuthenticationResponseJSON)");
  }
  const [credential] = await db()<
    { id: string; public_key: Buffer; counter: string; transports: string[] | null }[]
  >`select id, public_key, counter, transports from webauthn_credentials
    where id = ${response.id} and user_id = ${subject.ownerId}`;
  if (!credential) throw invalid("Unknown authenticator for this account");
  const challenges = await openChallenges(subject.agentId);
  const byEncoded = new Map(
    challenges.map((c) => [Buffer.from(c, "utf8").toString("base64url"), c]),
  );
  const app = new URL(env().APP_URL);
  let used: string | undefined;
  try {
    const result = await verifyAuthenticationResponse({
      response,
      expectedChallenge: (c) => {
        used = byEncoded.get(c);
        return used !== undefined;
      },
      expectedOrigin: app.origin,
      expectedRPID: app.hostname,
      credential: {
        id: credential.id,
        publicKey: new Uint8Array(credential.public_key),
        counter: Number(credential.counter),
        transports: (credential.transports ?? undefined) as Transports,
      },
      requireUserVerification: false,
    });
    if (!result.verified || !used) throw new Error("assertion not verified");
    await db()`
      update webauthn_credentials set counter = ${result.authenticationInfo.newCounter}
      where id = ${credential.id}`;
  } catch (error) {
    throw invalid(`signature: assertion does not check (${(error as Error).message})`);
  }
  return {
    verificationType: "webauthn",
    attestationUid: null,
    verifierAddress: null,
    metadata: { credentialId: credential.id },
    challenge: used,
  };
}

/** Registers an authenticator's public key (COSE) for a user. */
/** Stores an authenticator; false when its id is already registered (to anyone). */
export async function addWebauthnCredential(
  userId: string,
  credential: {
    id: string;
    publicKey: Uint8Array;
    counter?: number;
    transports?: string[];
    name?: string;
  },
): Promise<boolean> {
  // `on conflict do nothing`: two registrations of one authenticator racing each other end in
  // one row and a 409 for the other, never a unique-violation 500.
  const rows = await db()`
    insert into webauthn_credentials (id, user_id, public_key, counter, transports, name)
    values (${credential.id}, ${userId}, ${Buffer.from(credential.publicKey)},
            ${credential.counter ?? 0}, ${credential.transports ?? null},
            ${credential.name ?? "Security key"})
    on conflict (id) do nothing
    returning 1`;
  return rows.length === 1;
}

export async function checkProof(
  subject: ProofSubject,
  proof: Proof,
  deps: { ens?: EnsResolver } = {},
): Promise<CheckedProof> {
  switch (proof.verificationType) {
    case "eas":
      return checkEasProof(subject, proof.attestationUid);
    case "exchange":
      return checkExchangeProof(subject, proof.signature);
    case "ens":
      return checkEnsProof(
        subject,
        proof.signature,
        proof.walletAddress,
        deps.ens ?? registryEns(),
      );
    case "webauthn":
      return checkWebauthnProof(subject, proof.signature);
    default:
      throw invalid("verificationType: must be one of eas, exchange, ens, webauthn");
  }
}

const registryAbi = [
  {
    type: "function",
    name: "resolver",
    stateMutability: "view",
    inputs: [{ name: "node", type: "bytes32" }],
    outputs: [{ name: "", type: "address" }],
  },
] as const;
const resolverAbi = [
  {
    type: "function",
    name: "addr",
    stateMutability: "view",
    inputs: [{ name: "node", type: "bytes32" }],
    outputs: [{ name: "", type: "address" }],
  },
  {
    type: "function",
    name: "name",
    stateMutability: "view",
    inputs: [{ name: "node", type: "bytes32" }],
    outputs: [{ name: "", type: "string" }],
  },
] as const;

/**
 * ENS resolution on the configured chain through an ENS-compatible registry (Basenames' on
 * Base): reverse record `<address>.<ENS_REVERSE_SUFFIX>` → name, then name → addr.
 */
export function registryEns(): EnsResolver {
  const client = publicClient();
  const registry = checksum(env().ENS_REGISTRY_ADDRESS);
  const resolverOf = async (node: Hex) => {
    const r = await client.readContract({
      address: registry,
      abi: registryAbi,
      functionName: "resolver",
      args: [node],
    });
    return r === zeroAddress ? null : r;
  };
  return {
    async nameOf(address) {
      const node = namehash(`${address.toLowerCase().slice(2)}.${env().ENS_REVERSE_SUFFIX}`);
      const resolver = await resolverOf(node);
      if (!resolver) return null;
      const name = await client.readContract({
        address: resolver,
        abi: resolverAbi,
        functionName: "name",
        args: [node],
      });
      return name || null;
    },
    async addressOf(name) {
      const node = namehash(normalize(name));
      const resolver = await resolverOf(node);
      if (!resolver) return null;
      const addr = await client.readContract({
        address: resolver,
        abi: resolverAbi,
        functionName: "addr",
        args: [node],
      });
      return addr === zeroAddress ? null : addr;
    },
  };
}

// ---------------------------------------------------------------- the record

interface Row {
  verification_type: VerificationType;
  attestation_uid: string | null;
  verifier_address: string | null;
  verified_at: Date;
  metadata: Record<string, unknown> | null;
}

const toRecord = (r: Row | undefined): VerificationRecord =>
  r
    ? {
        verified: true,
        verificationType: r.verification_type,
        attestationUid: r.attestation_uid,
        verifierAddress: r.verifier_address,
        verifiedAt: r.verified_at.toISOString(),
        metadata: r.metadata,
      }
    : {
        verified: false,
        verificationType: null,
        attestationUid: null,
        verifierAddress: null,
        verifiedAt: null,
        metadata: null,
      };

export async function getAgentVerification(agentId: string): Promise<VerificationRecord> {
  const [row] = await db()<Row[]>`select * from agent_verifications where agent_id = ${agentId}`;
  return toRecord(row);
}

/** Stores a checked proof (replacing any earlier one) and uses up its challenge. */
export async function setAgentVerification(
  agentId: string,
  checked: CheckedProof,
): Promise<VerificationRecord> {
  if (checked.challenge && !(await consumeChallenge(agentId, checked.challenge))) {
    throw invalid("The verification challenge was already used or has expired");
  }
  const [row] = await db()<Row[]>`
    insert into agent_verifications
      (agent_id, verification_type, attestation_uid, verifier_address, metadata, verified_at)
    values (${agentId}, ${checked.verificationType}, ${checked.attestationUid},
            ${checked.verifierAddress}, ${checked.metadata ? db().json(checked.metadata as never) : null}, now())
    on conflict (agent_id) do update set
      verification_type = excluded.verification_type, attestation_uid = excluded.attestation_uid,
      verifier_address = excluded.verifier_address, metadata = excluded.metadata,
      verified_at = excluded.verified_at
    returning *`;
  return toRecord(row);
}

/** Checks a proof and, when it checks, stores it. What POST /api/agents/:id/verify calls. */
export async function verifyAgent(
  subject: ProofSubject,
  proof: Proof,
  deps: { ens?: EnsResolver } = {},
): Promise<VerificationRecord> {
  const checked = await checkProof(subject, proof, deps);
  return setAgentVerification(subject.agentId, checked);
}

/** Removes the verification; true when there was one. What DELETE /api/agents/:id/verify calls. */
export async function deleteAgentVerification(agentId: string): Promise<boolean> {
  const rows = await db()`delete from agent_verifications where agent_id = ${agentId} returning 1`;
  return rows.length === 1;
}
