import { z } from "zod";
import { type AuditActor, recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";

// Which OpenClaw build new instances, pooled gateways and updates get (the pinned image), and
// which OpenClaw versions nothing is created on or updated to (blocked), decision 0161. The
// environment gives the defaults (AGENT_GATEWAY_IMAGE, GATEWAY_BLOCKED_VERSIONS); the operator
// console overrides the pin and adds blocks without a redeploy. Instances already on a blocked
// version keep running (an operator updates them); a rollback may return to one, since it
// returns to what ran before.

export const VERSION = /^\d{4}\.\d{1,2}\.\d{1,3}$/;

/** The OpenClaw version an image tag names (`agent-gateway:2026.9.5` → `2026.9.5`). */
export function versionOfTag(tag: string): string | undefined {
  const version = tag.slice(tag.lastIndexOf(":") + 1);
  return tag.includes(":") && VERSION.test(version) ? version : undefined;
}

const list = (raw: string) =>
  raw
    .split(",")
    .map((v) => v.trim())
    .filter(Boolean);

export interface VersionPolicy {
  pinnedImage: string;
  pinnedBy: "operator" | "environment";
  blockedVersions: string[];
  blockedByEnvironment: string[];
  blockedByOperator: string[];
  updatedAt: string | null;
}

export async function gatewayVersionPolicy(): Promise<VersionPolicy> {
  const [row] = await db()<
    { pinned_image: string | null; blocked_versions: string[]; updated_at: Date }[]
  >`select pinned_image, blocked_versions, updated_at from gateway_version_policy`;
  const fromEnv = list(env().GATEWAY_BLOCKED_VERSIONS);
  const byOperator = row?.blocked_versions ?? [];
  return {
    pinnedImage: row?.pinned_image ?? env().AGENT_GATEWAY_IMAGE,
    pinnedBy: row?.pinned_image ? "operator" : "environment",
    blockedVersions: [...new Set([...fromEnv, ...byOperator])],
    blockedByEnvironment: fromEnv,
    blockedByOperator: byOperator,
    updatedAt: row?.updated_at.toISOString() ?? null,
  };
}

/** Why a gateway may not be created on or updated to this image tag, if it may not. */
export function blockedReason(policy: VersionPolicy, tag: string): string | undefined {
  const version = versionOfTag(tag);
  if (version && policy.blockedVersions.includes(version)) {
    return `OpenClaw ${version} (${tag}) is blocked by the operator`;
  }
  return undefined;
}

export const versionPolicyInput = z.object({
  /** An image tag (`repository:version`); blank: back to AGENT_GATEWAY_IMAGE. */
  pinnedImage: z
    .string()
    .trim()
    .max(200)
    .refine((t) => t === "" || /^[a-z0-9][a-z0-9._/-]*:[A-Za-z0-9._-]+$/.test(t), {
      message: "must be an image tag like agent-gateway:2026.9.6",
    }),
  /** Comma-separated OpenClaw versions. */
  blockedVersions: z
    .string()
    .max(500)
    .transform(list)
    .refine((vs) => vs.every((v) => VERSION.test(v)), {
      message: "must be versions like 2026.9.5, separated by commas",
    }),
});
export type VersionPolicyInput = z.output<typeof versionPolicyInput>;

/** The operator's pin and blocks; a pin on a blocked version is refused (400). */
export async function setGatewayVersionPolicy(input: VersionPolicyInput, actor: AuditActor) {
  const next = {
    pinnedImage: input.pinnedImage || env().AGENT_GATEWAY_IMAGE,
    blockedVersions: [
      ...new Set([...list(env().GATEWAY_BLOCKED_VERSIONS), ...input.blockedVersions]),
    ],
  } as VersionPolicy;
  const blocked = blockedReason(next, next.pinnedImage);
  if (blocked) throw new DomainError(400, `Cannot pin ${next.pinnedImage}: ${blocked}`);
  await db().begin(async (tx) => {
    await tx`
      insert into gateway_version_policy (id, pinned_image, blocked_versions, updated_by)
      values (true, ${input.pinnedImage || null}, ${input.blockedVersions}, ${actor.userId ?? null})
      on conflict (id) do update set pinned_image = excluded.pinned_image,
        blocked_versions = excluded.blocked_versions, updated_by = excluded.updated_by,
        updated_at = now()`;
    await recordAudit(
      {
        action: "gateway.versions_changed",
        actor,
        userId: null,
        target: "gateway-versions",
        details: {
          pinnedImage: input.pinnedImage || null,
          blocked: input.blockedVersions.join(","),
        },
      },
      tx,
    );
  });
  return gatewayVersionPolicy();
}
