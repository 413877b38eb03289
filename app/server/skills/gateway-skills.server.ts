import { createHash, randomUUID } from "node:crypto";
import { z } from "zod";
import type { GatewayClient } from "../openclaw/client.server.ts";
import { GatewayUnavailableError } from "../openclaw/errors.server.ts";

// The skills RPCs of an OpenClaw gateway (2026.9) the marketplace uses: skills.status (what an
// agent has, eligible or not and why), skills.upload.* + skills.install in upload mode (writes
// the skill folder into the agent's workspace `skills/<name>`) and skills.update (enable).

const missingSchema = z
  .object({
    bins: z.array(z.string()).default([]),
    anyBins: z.array(z.string()).default([]),
    env: z.array(z.string()).default([]),
    config: z.array(z.string()).default([]),
    os: z.array(z.string()).default([]),
  })
  .partial()
  .passthrough();

const statusSkillSchema = z
  .object({
    skillKey: z.string(),
    name: z.string().optional(),
    description: z.string().optional(),
    source: z.string().optional(),
    bundled: z.boolean().optional(),
    filePath: z.string().optional(),
    baseDir: z.string().optional(),
    eligible: z.boolean().optional(),
    disabled: z.boolean().optional(),
    missing: missingSchema.optional(),
  })
  .passthrough();
export type GatewaySkillStatus = z.infer<typeof statusSkillSchema>;

const statusSchema = z
  .object({ workspaceDir: z.string().optional(), skills: z.array(statusSkillSchema).default([]) })
  .passthrough();

export async function skillsStatus(client: GatewayClient, gatewayAgentId: string) {
  return statusSchema.parse(await client.request("skills.status", { agentId: gatewayAgentId }));
}

/** What a skill still lacks on the agent, as the gateway reports it (empty: nothing). */
export function missingOf(skill: GatewaySkillStatus): string[] {
  const m = skill.missing ?? {};
  return [
    ...(m.bins ?? []).map((b) => `binary ${b}`),
    ...((m.anyBins ?? []).length ? [`one of the binaries ${(m.anyBins ?? []).join(", ")}`] : []),
    ...(m.env ?? []).map((e) => `environment variable ${e}`),
    ...(m.config ?? []).map((c) => `config ${c}`),
    ...((m.os ?? []).length ? [`operating system ${(m.os ?? []).join(" or ")}`] : []),
  ];
}

const configSnapshot = z
  .object({
    hash: z.string().optional(),
    config: z
      .object({
        skills: z
          .object({
            install: z
              .object({ allowUploadedArchives: z.boolean().optional() })
              .passthrough()
              .optional(),
          })
          .passthrough()
          .optional(),
      })
      .passthrough()
      .optional(),
  })
  .passthrough();

/**
 * Uploaded archives are off by default in OpenClaw; the platform's gateways take them (the
 * platform checked the archive, decision 0111). New gateways get it in their config at
 * provisioning; an older one is patched here once.
 */
async function allowUploads(client: GatewayClient): Promise<void> {
  const snapshot = configSnapshot.parse(await client.request("config.get"));
  if (snapshot.config?.skills?.install?.allowUploadedArchives === true) return;
  await client.request(
    "config.patch",
    {
      baseHash: snapshot.hash,
      raw: JSON.stringify({ skills: { install: { allowUploadedArchives: true } } }),
    },
    { timeoutMs: 30_000 },
  );
}

const CHUNK_BYTES = 192 * 1024;

/** Writes the archive's folder to `<workspace>/skills/<slug>` of the agent (replacing it on `force`). */
export async function installArchive(
  client: GatewayClient,
  input: { gatewayAgentId: string; slug: string; archive: Buffer; force: boolean },
): Promise<void> {
  await allowUploads(client);
  const sha256 = createHash("sha256").update(input.archive).digest("hex");
  const begun = z
    .object({ uploadId: z.string() })
    .passthrough()
    .parse(
      await client.request("skills.upload.begin", {
        kind: "skill-archive",
        slug: input.slug,
        sizeBytes: input.archive.length,
        sha256,
        force: input.force,
        idempotencyKey: randomUUID(),
      }),
    );
  for (let offset = 0; offset < input.archive.length; offset += CHUNK_BYTES) {
    await client.request("skills.upload.chunk", {
      uploadId: begun.uploadId,
      offset,
      dataBase64: input.archive.subarray(offset, offset + CHUNK_BYTES).toString("base64"),
    });
  }
  await client.request("skills.upload.commit", { uploadId: begun.uploadId, sha256 });
  await client.request(
    "skills.install",
    {
      source: "upload",
      agentId: input.gatewayAgentId,
      uploadId: begun.uploadId,
      slug: input.slug,
      force: input.force,
      sha256,
    },
    { timeoutMs: 60_000 },
  );
}

export async function setSkillEnabled(client: GatewayClient, skillKey: string, enabled: boolean) {
  await client.request("skills.update", { skillKey, enabled });
}

/**
 * Waits until the agent's skill list shows `name` as `want` says (the gateway's watcher picks a
 * new folder up within ~250 ms; a config change reloads). Returns the last status seen.
 */
export async function waitForSkill(
  client: GatewayClient,
  gatewayAgentId: string,
  name: string,
  want: (skill: GatewaySkillStatus | undefined) => boolean,
  timeoutMs = 20_000,
): Promise<{ skill: GatewaySkillStatus | undefined; workspaceDir: string | undefined }> {
  const deadline = Date.now() + timeoutMs;
  for (let delay = 50; ; delay = Math.min(delay * 2, 500)) {
    const status = await skillsStatus(client, gatewayAgentId);
    const skill = status.skills.find((s) => (s.name ?? s.skillKey) === name);
    if (want(skill)) return { skill, workspaceDir: status.workspaceDir };
    if (Date.now() > deadline) {
      throw new GatewayUnavailableError(
        `skills.status: ${name} did not settle within ${timeoutMs} ms`,
      );
    }
    await new Promise((r) => setTimeout(r, delay));
  }
}
