import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { newSkillId, storeVersion, syncShippedSkills } from "./shipped.server.ts";
import {
  compareVersions,
  packageFromSkillMd,
  packageFromZip,
  type SkillPackage,
} from "./skill-package.server.ts";

// Publishing: a signed-in user sends a skill as a zip archive (base64) or as SKILL.md text; it
// is checked (skill-package.server.ts), stored as an immutable version, private (theirs alone)
// or public (listed once an operator approves that version). A publisher can unlist a version.
// docs/decisions/0111-skills-catalog-and-publishing.md

export interface PublishInput {
  /** A zip archive, base64. */
  archive?: string | undefined;
  skillMd?: string | undefined;
  visibility: "public" | "private";
}

function packageOf(input: PublishInput): SkillPackage {
  if (input.archive !== undefined && input.skillMd !== undefined) {
    throw new DomainError(400, "Send either archive or skillMd, not both");
  }
  if (input.archive !== undefined) {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(input.archive)) {
      throw new DomainError(400, "archive must be a base64-encoded zip file");
    }
    return packageFromZip(Buffer.from(input.archive, "base64"));
  }
  if (input.skillMd !== undefined) return packageFromSkillMd(input.skillMd);
  throw new DomainError(400, "archive or skillMd is required");
}

export async function publishSkill(userId: string, input: PublishInput) {
  const pkg = packageOf(input);
  await syncShippedSkills(); // shipped names are taken before anyone can publish them
  return db().begin(async (tx) => {
    // One publish per name at a time: the version check and insert cannot interleave.
    await tx`select pg_advisory_xact_lock(hashtext(${`skill:${pkg.name}`}))`;
    const [existing] = await tx<{ id: string; publisher_id: string | null }[]>`
      select id, publisher_id from skills where name = ${pkg.name}`;
    if (existing && existing.publisher_id !== userId) {
      throw new DomainError(409, `The skill name ${pkg.name} belongs to another publisher`);
    }
    let skillId = existing?.id;
    if (skillId) {
      const versions = await tx<{ version: string }[]>`
        select version from skill_versions where skill_id = ${skillId}`;
      if (versions.some((v) => v.version === pkg.version)) {
        throw new DomainError(
          409,
          `${pkg.name} ${pkg.version} is already published; a published version never changes, publish a new version`,
        );
      }
      const newest = versions
        .map((v) => v.version)
        .sort(compareVersions)
        .at(-1);
      if (newest && compareVersions(pkg.version, newest) < 0) {
        throw new DomainError(
          409,
          `${pkg.name} ${pkg.version} is older than ${newest}, the newest published version`,
        );
      }
      await tx`update skills set visibility = ${input.visibility}, category = ${pkg.category}
        where id = ${skillId}`;
    } else {
      skillId = newSkillId();
      await tx`insert into skills (id, name, source, publisher_id, visibility, category)
        values (${skillId}, ${pkg.name}, 'user', ${userId}, ${input.visibility}, ${pkg.category})`;
    }
    const { versionId } = await storeVersion(pkg, { id: skillId }, tx);
    return {
      name: pkg.name,
      version: pkg.version,
      versionId,
      visibility: input.visibility,
      status:
        input.visibility === "public" ? ("pending-approval" as const) : ("published" as const),
      sizeBytes: pkg.sizeBytes,
      fileCount: pkg.fileCount,
    };
  });
}

/** Withdraws one version of the caller's skill from the catalog (installed copies stay). */
export async function unlistVersion(userId: string, name: string, version: string) {
  const rows = await db()<{ id: string }[]>`
    update skill_versions v set unlisted_at = coalesce(v.unlisted_at, now())
    from skills s
    where s.id = v.skill_id and s.name = ${name} and s.publisher_id = ${userId}
      and v.version = ${version}
    returning v.id`;
  if (rows.length === 0) throw new DomainError(404, "Skill version not found");
  return { name, version, unlisted: true };
}

/** Public versions waiting for an operator. */
export async function pendingVersions() {
  return db()<
    { id: string; name: string; version: string; publisher_id: string; created_at: Date }[]
  >`
    select v.id, s.name, v.version, s.publisher_id, v.created_at
    from skill_versions v join skills s on s.id = v.skill_id
    where s.visibility = 'public' and s.source = 'user' and v.approved_at is null
      and v.unlisted_at is null
    order by v.created_at`;
}

/**
 * An operator approves a public version; it appears in the catalog. The caller checks that
 * `actor` is an operator (the operator console owns that role).
 */
export async function approveSkill(versionId: string, actor: string) {
  const [row] = await db()<{ name: string; version: string }[]>`
    update skill_versions v set approved_at = coalesce(v.approved_at, now()),
      approved_by = coalesce(v.approved_by, ${actor})
    from skills s where s.id = v.skill_id and v.id = ${versionId}
    returning s.name, v.version`;
  if (!row) throw new DomainError(404, "Skill version not found");
  return { ...row, approved: true };
}
