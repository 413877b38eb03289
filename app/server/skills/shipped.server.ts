import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { db } from "../platform/db.server.ts";
import type { Queryable } from "../platform/db-helpers.server.ts";
import { randomAlphanumeric } from "../platform/ids.server.ts";
import { logger } from "../platform/logger.server.ts";
import { packageFromZip, type SkillPackage, versionParts } from "./skill-package.server.ts";
import { writeZip } from "./zip.server.ts";

// The skills the platform ships: gateway/skills/<name>/ folders in the repository. They go
// into the catalog tables (publisher: the platform, public, approved) the first time a process
// reads the catalog; a new version in the repository becomes a new immutable version row. They
// are installed through the platform like any skill, not baked into the gateway image.

export const newSkillId = () => `skl_${randomAlphanumeric(20)}`;
export const newVersionId = () => `skv_${randomAlphanumeric(20)}`;

/** gateway/skills, found by walking up from this module (source and bundled build alike). */
function shippedDir(): string | undefined {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = path.join(dir, "gateway", "skills");
    if (existsSync(path.join(dir, "package.json")))
      return existsSync(candidate) ? candidate : undefined;
    const parent = path.dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

function filesUnder(root: string, rel = ""): Array<{ path: string; data: Buffer; mode: number }> {
  const out: Array<{ path: string; data: Buffer; mode: number }> = [];
  for (const name of readdirSync(path.join(root, rel)).sort()) {
    const relPath = rel ? `${rel}/${name}` : name;
    const stat = statSync(path.join(root, relPath));
    if (stat.isDirectory()) out.push(...filesUnder(root, relPath));
    else
      out.push({
        path: relPath,
        data: readFileSync(path.join(root, relPath)),
        mode: stat.mode & 0o777,
      });
  }
  return out;
}

/** The shipped skill folders, each checked exactly as a published one is. */
export function shippedPackages(): SkillPackage[] {
  const root = shippedDir();
  if (!root) return [];
  return readdirSync(root)
    .filter((name) => statSync(path.join(root, name)).isDirectory())
    .sort()
    .map((name) => packageFromZip(writeZip(filesUnder(path.join(root, name)))));
}

/** Inserts a package as a version of its skill (creating the skill); false when it exists. */
export async function storeVersion(
  pkg: SkillPackage,
  skill: { id: string; approvedBy?: string },
  sql: Queryable = db(),
): Promise<{ versionId: string; created: boolean }> {
  const [major, minor, patch] = versionParts(pkg.version);
  const versionId = newVersionId();
  const rows = await sql<{ id: string }[]>`
    insert into skill_versions (id, skill_id, version, major, minor, patch, description,
      requirements, skill_md, archive, sha256, size_bytes, file_count, approved_at, approved_by)
    values (${versionId}, ${skill.id}, ${pkg.version}, ${major}, ${minor}, ${patch},
      ${pkg.description}, ${sql.json(pkg.requirements as never)}, ${pkg.skillMd}, ${pkg.archive},
      ${pkg.sha256}, ${pkg.sizeBytes}, ${pkg.fileCount},
      ${skill.approvedBy ? new Date() : null}, ${skill.approvedBy ?? null})
    on conflict (skill_id, version) do nothing
    returning id`;
  return { versionId: rows[0]?.id ?? versionId, created: rows.length > 0 };
}

let synced: Promise<void> | undefined;

/** Puts the shipped skills into the catalog once per process. */
export function syncShippedSkills(): Promise<void> {
  synced ??= (async () => {
    for (const pkg of shippedPackages()) {
      const [skill] = await db()<{ id: string; source: string }[]>`
        insert into skills (id, name, source, publisher_id, visibility, category)
        values (${newSkillId()}, ${pkg.name}, 'platform', null, 'public', ${pkg.category})
        on conflict (name) do update set category = excluded.category
          where skills.source = 'platform'
        returning id, source`;
      if (!skill) {
        // A user took the name first: the shipped one stays out rather than replace theirs.
        logger().warn({ skill: pkg.name }, "shipped skill name is taken by a user's skill");
        continue;
      }
      await storeVersion(pkg, { id: skill.id, approvedBy: "platform" });
    }
  })().catch((error: unknown) => {
    synced = undefined;
    throw error;
  });
  return synced;
}

/** Tests: forget that the shipped skills were synced (each test file has its own database). */
export function resetShippedSync(): void {
  synced = undefined;
}
