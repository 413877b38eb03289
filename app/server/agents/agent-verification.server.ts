import { z } from "zod";
import {
  createVerificationChallenge,
  deleteAgentVerification,
  getAgentVerification,
  type Proof,
  verificationTypes,
  verifyAgent,
} from "../identity/verification.server.ts";
import { getOwnedAgent } from "./agents.server.ts";

// /api/agents/:id/verify: an agent's verification record (identity/verification.server.ts
// checks the proofs); every function reads the agent through getOwnedAgent first.

export const verifyBody = z
  .object({
    verificationType: z.enum(verificationTypes, {
      error: `verificationType must be one of ${verificationTypes.join(", ")}`,
    }),
    attestationUid: z.string().min(1).max(200).optional(),
    signature: z.string().min(1).max(20_000).optional(),
    walletAddress: z.string().min(1).max(100).optional(),
  })
  .superRefine((b, ctx) => {
    if (b.verificationType === "eas" && !b.attestationUid) {
      ctx.addIssue({ code: "custom", path: ["attestationUid"], message: "required for eas" });
    }
    if (b.verificationType !== "eas" && !b.signature) {
      ctx.addIssue({
        code: "custom",
        path: ["signature"],
        message: `required for ${b.verificationType}`,
      });
    }
    if (b.verificationType === "ens" && !b.walletAddress) {
      ctx.addIssue({ code: "custom", path: ["walletAddress"], message: "required for ens" });
    }
  });

function proofOf(body: z.infer<typeof verifyBody>): Proof {
  switch (body.verificationType) {
    case "eas":
      return { verificationType: "eas", attestationUid: body.attestationUid as string };
    case "ens":
      return {
        verificationType: "ens",
        signature: body.signature as string,
        walletAddress: body.walletAddress as string,
      };
    default:
      return { verificationType: body.verificationType, signature: body.signature as string };
  }
}

export async function readAgentVerification(userId: string, agentId: string) {
  const agent = await getOwnedAgent(userId, agentId);
  const { metadata: _metadata, ...record } = await getAgentVerification(agent.id);
  return record;
}

export async function submitAgentVerification(
  userId: string,
  agentId: string,
  body: z.infer<typeof verifyBody>,
) {
  const agent = await getOwnedAgent(userId, agentId);
  const record = await verifyAgent({ agentId: agent.id, ownerId: userId }, proofOf(body));
  return {
    success: true,
    verified: record.verified,
    verificationType: record.verificationType,
    attestationUid: record.attestationUid,
    verifiedAt: record.verifiedAt,
  };
}

export async function removeAgentVerification(userId: string, agentId: string) {
  const agent = await getOwnedAgent(userId, agentId);
  await deleteAgentVerification(agent.id);
  return { success: true };
}

export async function agentVerificationChallenge(userId: string, agentId: string) {
  const agent = await getOwnedAgent(userId, agentId);
  const { challenge, expiresAt } = await createVerificationChallenge(agent.id);
  return { challenge, expiresAt: expiresAt.toISOString() };
}
