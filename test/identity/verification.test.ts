import {
  type Address,
  encodeAbiParameters,
  encodePacked,
  type Hex,
  keccak256,
  parseEventLogs,
  zeroAddress,
  zeroHash,
} from "viem";
import { namehash } from "viem/ens";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { userForWallet } from "../../app/server/identity/siwe.server.ts";
import {
  addWebauthnCredential,
  createVerificationChallenge,
  deleteAgentVerification,
  getAgentVerification,
  verifyAgent,
} from "../../app/server/identity/verification.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { DomainError } from "../../app/server/platform/errors.server.ts";
import { newUser } from "../accounts/helpers.ts";
import { type Anvil, compile, easArtifact, startAnvil } from "./anvil.ts";
import { APP, softAuthenticator } from "./soft-authenticator.ts";

let anvil: Anvil;
let eas: Address;
let schemaUid: Hex;
let ownerId: string;
let owner: ReturnType<Anvil["account"]>;
const EAS = easArtifact("EAS");
const SCHEMA = "string agentId";
let agentCounter = 0;
/** A real agent row of the owner (agent_verifications references agents). */
async function newAgentId(userId = ownerId): Promise<string> {
  const id = `agt_test${Date.now()}${++agentCounter}`;
  await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
    values (${id}, ${userId}, ${id}, ${id.replace("_", "-")}, 'custom', 'starter')`;
  return id;
}

beforeAll(async () => {
  process.env.APP_URL = APP;
  anvil = await startAnvil();
  const registry = await anvil.deploy(easArtifact("SchemaRegistry"));
  eas = await anvil.deploy(EAS, [registry]);
  await anvil.write(registry, easArtifact("SchemaRegistry").abi, "register", [
    SCHEMA,
    zeroAddress,
    true,
  ]);
  schemaUid = keccak256(encodePacked(["string", "address", "bool"], [SCHEMA, zeroAddress, true]));
  process.env.EAS_CONTRACT_ADDRESS = eas;
  resetEnvCache();
  owner = anvil.account(1);
  ownerId = (await userForWallet(owner.address)).user.id;
});
afterAll(async () => {
  await anvil?.stop();
  delete process.env.APP_URL;
  delete process.env.EAS_CONTRACT_ADDRESS;
  delete process.env.ENS_REGISTRY_ADDRESS;
  resetEnvCache();
});

async function attest(recipient: Address, agentId: string, from = 2): Promise<Hex> {
  const hash = await anvil.write(
    eas,
    EAS.abi,
    "attest",
    [
      {
        schema: schemaUid,
        data: {
          recipient,
          expirationTime: 0n,
          revocable: true,
          refUID: zeroHash,
          data: encodeAbiParameters([{ type: "string" }], [agentId]),
          value: 0n,
        },
      },
    ],
    from,
  );
  const receipt = await anvil.client.getTransactionReceipt({ hash });
  const [log] = parseEventLogs({ abi: EAS.abi, logs: receipt.logs, eventName: "Attested" });
  return (log as unknown as { args: { uid: Hex } }).args.uid;
}

async function refused(promise: Promise<unknown>, status = 400): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DomainError);
  expect((error as DomainError).status).toBe(status);
  return (error as DomainError).message;
}

describe("eas proofs against the EAS contracts on anvil", () => {
  it("accepts an attestation whose recipient is the owner's wallet, and stores the record", async () => {
    const agentId = await newAgentId();
    const uid = await attest(owner.address, "something else");
    const record = await verifyAgent(
      { agentId, ownerId },
      { verificationType: "eas", attestationUid: uid },
    );
    expect(record).toMatchObject({
      verified: true,
      verificationType: "eas",
      attestationUid: uid,
      verifierAddress: anvil.account(2).address,
    });
    expect(Number.isNaN(Date.parse(record.verifiedAt!))).toBe(false);
    expect(await getAgentVerification(agentId)).toEqual(record);
  });

  it("accepts an attestation naming the agent id in its data", async () => {
    const agentId = await newAgentId();
    const uid = await attest(anvil.account(5).address, agentId);
    const record = await verifyAgent(
      { agentId, ownerId },
      { verificationType: "eas", attestationUid: uid },
    );
    expect(record.verified).toBe(true);
  });

  it("refuses unknown, malformed, unrelated and revoked attestations; stores nothing", async () => {
    const agentId = await newAgentId();
    const subject = { agentId, ownerId };
    expect(
      await refused(
        verifyAgent(subject, { verificationType: "eas", attestationUid: `0x${"ab".repeat(32)}` }),
      ),
    ).toMatch(/not found/);
    await refused(verifyAgent(subject, { verificationType: "eas", attestationUid: "0x1234" }));
    const unrelated = await attest(anvil.account(6).address, "agt_someone_else");
    expect(
      await refused(verifyAgent(subject, { verificationType: "eas", attestationUid: unrelated })),
    ).toMatch(/names neither/);
    const uid = await attest(owner.address, agentId);
    await anvil.write(eas, EAS.abi, "revoke", [{ schema: schemaUid, data: { uid, value: 0n } }], 2);
    expect(
      await refused(verifyAgent(subject, { verificationType: "eas", attestationUid: uid })),
    ).toMatch(/revoked/);
    expect((await getAgentVerification(agentId)).verified).toBe(false);
  });
});

describe("exchange proofs (the owner's linked wallet signs the challenge)", () => {
  it("accepts the owner's signature once; refuses a stranger's and a reused challenge", async () => {
    const agentId = await newAgentId();
    const { challenge } = await createVerificationChallenge(agentId);
    const stranger = await anvil.account(3).signMessage({ message: challenge });
    await refused(
      verifyAgent({ agentId, ownerId }, { verificationType: "exchange", signature: stranger }),
    );
    expect((await getAgentVerification(agentId)).verified).toBe(false);

    const signature = await owner.signMessage({ message: challenge });
    const record = await verifyAgent(
      { agentId, ownerId },
      { verificationType: "exchange", signature },
    );
    expect(record).toMatchObject({
      verified: true,
      verificationType: "exchange",
      attestationUid: null,
      verifierAddress: owner.address,
    });
    // The challenge is used up.
    await refused(verifyAgent({ agentId, ownerId }, { verificationType: "exchange", signature }));
  });

  it("refuses when the owner has no linked wallet", async () => {
    const agentId = await newAgentId();
    const { id } = await newUser();
    const { challenge } = await createVerificationChallenge(agentId);
    const signature = await owner.signMessage({ message: challenge });
    expect(
      await refused(
        verifyAgent({ agentId, ownerId: id }, { verificationType: "exchange", signature }),
      ),
    ).toMatch(/no linked wallet/);
  });
});

describe("ens proofs against an ENS-compatible registry on anvil", () => {
  const ens = compile("MiniEns.sol");
  let registry: Address;
  let resolver: Address;
  const wallet = () => anvil.account(4);
  const NAME = "agent-owner.base.eth";

  async function setRecords(forward: Address) {
    const reverse = namehash(`${wallet().address.toLowerCase().slice(2)}.80002105.reverse`);
    const R = ens.MiniEnsRegistry!.abi;
    const S = ens.MiniEnsResolver!.abi;
    await anvil.write(registry, R, "setResolver", [reverse, resolver]);
    await anvil.write(registry, R, "setResolver", [namehash(NAME), resolver]);
    await anvil.write(resolver, S, "setName", [reverse, NAME]);
    await anvil.write(resolver, S, "setAddr", [namehash(NAME), forward]);
  }

  beforeAll(async () => {
    registry = await anvil.deploy(ens.MiniEnsRegistry!);
    resolver = await anvil.deploy(ens.MiniEnsResolver!);
    process.env.ENS_REGISTRY_ADDRESS = registry;
    resetEnvCache();
  });

  it("accepts walletAddress's signature when its primary name resolves back to it", async () => {
    await setRecords(wallet().address);
    const agentId = await newAgentId();
    const { challenge } = await createVerificationChallenge(agentId);
    const signature = await wallet().signMessage({ message: challenge });
    const record = await verifyAgent(
      { agentId, ownerId },
      { verificationType: "ens", signature, walletAddress: wallet().address.toLowerCase() },
    );
    expect(record).toMatchObject({
      verificationType: "ens",
      verifierAddress: wallet().address,
      metadata: { ensName: NAME },
    });
  });

  it("refuses a name resolving elsewhere, a signature by another key, and no name", async () => {
    await setRecords(owner.address);
    const agentId = await newAgentId();
    const { challenge } = await createVerificationChallenge(agentId);
    const signature = await wallet().signMessage({ message: challenge });
    const proof = { verificationType: "ens", signature, walletAddress: wallet().address } as const;
    expect(await refused(verifyAgent({ agentId, ownerId }, proof))).toMatch(/does not resolve/);
    await setRecords(wallet().address);
    const other = await owner.signMessage({ message: challenge });
    await refused(verifyAgent({ agentId, ownerId }, { ...proof, signature: other }));
    const nameless = anvil.account(7);
    const signed = await nameless.signMessage({ message: challenge });
    expect(
      await refused(
        verifyAgent(
          { agentId, ownerId },
          { verificationType: "ens", signature: signed, walletAddress: nameless.address },
        ),
      ),
    ).toMatch(/no ENS name/);
  });
});

describe("webauthn proofs", () => {
  const key = softAuthenticator("test-credential-1");
  const credentialId = key.id;
  const assertion = (challenge: string, counter: number, origin = APP) =>
    key.assertion(challenge, counter, origin);

  it("accepts a registered authenticator's assertion over the challenge", async () => {
    await addWebauthnCredential(ownerId, { id: credentialId, publicKey: key.cose });
    const agentId = await newAgentId();
    const { challenge } = await createVerificationChallenge(agentId);
    const record = await verifyAgent(
      { agentId, ownerId },
      { verificationType: "webauthn", signature: assertion(challenge, 1) },
    );
    expect(record).toMatchObject({ verified: true, verificationType: "webauthn" });
  });

  it("refuses a wrong origin, an unissued challenge, another user's authenticator, and junk", async () => {
    const agentId = await newAgentId();
    const { challenge } = await createVerificationChallenge(agentId);
    await refused(
      verifyAgent(
        { agentId, ownerId },
        {
          verificationType: "webauthn",
          signature: assertion(challenge, 2, "https://evil.example"),
        },
      ),
    );
    await refused(
      verifyAgent(
        { agentId, ownerId },
        { verificationType: "webauthn", signature: assertion("not issued", 3) },
      ),
    );
    const { id: otherUser } = await newUser();
    expect(
      await refused(
        verifyAgent(
          { agentId, ownerId: otherUser },
          { verificationType: "webauthn", signature: assertion(challenge, 4) },
        ),
      ),
    ).toMatch(/Unknown authenticator/);
    await refused(
      verifyAgent({ agentId, ownerId }, { verificationType: "webauthn", signature: "{" }),
    );
    expect((await getAgentVerification(agentId)).verified).toBe(false);
  });
});

describe("the verification record", () => {
  it("is unverified by default, and deletion removes it", async () => {
    const agentId = await newAgentId();
    expect(await getAgentVerification(agentId)).toEqual({
      verified: false,
      verificationType: null,
      attestationUid: null,
      verifierAddress: null,
      verifiedAt: null,
      metadata: null,
    });
    const uid = await attest(owner.address, agentId);
    await verifyAgent({ agentId, ownerId }, { verificationType: "eas", attestationUid: uid });
    expect(await deleteAgentVerification(agentId)).toBe(true);
    expect((await getAgentVerification(agentId)).verified).toBe(false);
    expect(await deleteAgentVerification(agentId)).toBe(false);
  });
});
