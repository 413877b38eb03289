import { createHash } from "node:crypto";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { DomainError } from "../platform/errors.server.ts";
import { readZip, writeZip, ZipError, type ZipInput } from "./zip.server.ts";

// A skill package: the SKILL.md folder (AgentSkills format, as OpenClaw loads it) checked and
// normalised into the zip the platform stores and hands to gateways. Everything a publisher
// sends goes through here; a refusal is a 400 naming the reason, and nothing is stored.
// docs/decisions/0111-skills-catalog-and-publishing.md

export const SKILL_LIMITS = {
  /** The archive as sent (base64 in a 1 MiB JSON body). */
  archiveBytes: 512 * 1024,
  /** All files unpacked. */
  totalBytes: 1024 * 1024,
  fileBytes: 256 * 1024,
  skillMdBytes: 64 * 1024,
  files: 64,
  pathChars: 200,
} as const;

export const SKILL_NAME = /^[a-z0-9](?:[a-z0-9-]{0,46}[a-z0-9])?$/;
export const SEMVER = /^(0|[1-9]\d{0,8})\.(0|[1-9]\d{0,8})\.(0|[1-9]\d{0,8})$/;
export const SKILL_CATEGORIES = [
  "productivity",
  "writing",
  "memory",
  "utilities",
  "communication",
  "developer",
  "general",
] as const;

const stringList = z.array(z.string().min(1).max(200)).max(32);

/** The frontmatter fields the platform reads; anything else OpenClaw understands passes through. */
export const frontmatterSchema = z
  .object({
    name: z.string().regex(SKILL_NAME, "must be 1-48 lower-case letters, digits and dashes"),
    description: z.string().trim().min(1).max(500),
    // YAML reads `1.0` as a number; it gets the same message as any other non-semver.
    version: z.preprocess(
      (v) => (typeof v === "number" ? String(v) : v),
      z.string().regex(SEMVER, "must be a semantic version MAJOR.MINOR.PATCH"),
    ),
    homepage: z.string().url().max(500).optional(),
    "user-invocable": z.boolean().optional(),
    metadata: z
      .object({
        openclaw: z
          .object({
            emoji: z.string().max(16).optional(),
            requires: z
              .object({
                bins: stringList.optional(),
                anyBins: stringList.optional(),
                env: stringList.optional(),
                config: stringList.optional(),
                os: stringList.optional(),
              })
              .passthrough()
              .optional(),
          })
          .passthrough()
          .optional(),
        platform: z
          .object({
            category: z.enum(SKILL_CATEGORIES).optional(),
            /** Files that may be executable (scripts the skill runs); anything else may not. */
            executables: stringList.optional(),
          })
          .optional(),
      })
      .passthrough()
      .optional(),
  })
  .passthrough();
export type Frontmatter = z.infer<typeof frontmatterSchema>;

export interface Requirements {
  bins: string[];
  env: string[];
  config: string[];
  channels: string[];
}

export interface SkillPackage {
  name: string;
  version: string;
  description: string;
  category: (typeof SKILL_CATEGORIES)[number];
  requirements: Requirements;
  skillMd: string;
  /** Normalised zip: SKILL.md first, then the other files by path. */
  archive: Buffer;
  sha256: string;
  sizeBytes: number;
  fileCount: number;
}

const refuse = (reason: string) => new DomainError(400, `Invalid skill: ${reason}`);

/** Splits SKILL.md into its YAML frontmatter (checked) and body. */
export function parseSkillMd(text: string): { frontmatter: Frontmatter; body: string } {
  const match = /^---\r?\n([\s\S]*?)\r?\n---(?:\r?\n|$)([\s\S]*)$/.exec(
    text.replace(/^\uFEFF/, ""),
  );
  if (!match) throw refuse("SKILL.md must start with a --- frontmatter block ---");
  let raw: unknown;
  try {
    raw = parseYaml(match[1] ?? "", { maxAliasCount: 0 });
  } catch (error) {
    throw refuse(
      `SKILL.md frontmatter is not valid YAML (${(error as Error).message.split("\n")[0]})`,
    );
  }
  const parsed = frontmatterSchema.safeParse(raw ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw refuse(`SKILL.md frontmatter ${issue?.path.join(".") || "block"}: ${issue?.message}`);
  }
  const body = match[2] ?? "";
  if (!body.trim()) throw refuse("SKILL.md has no instructions after its frontmatter");
  return { frontmatter: parsed.data, body };
}

export function requirementsOf(frontmatter: Frontmatter): Requirements {
  const requires = frontmatter.metadata?.openclaw?.requires ?? {};
  const config = requires.config ?? [];
  return {
    bins: [...(requires.bins ?? []), ...(requires.anyBins ?? [])],
    env: requires.env ?? [],
    config: config.filter((c) => !c.startsWith("channels.")),
    // A channel requirement is a config path under channels.<id> (OpenClaw's gating).
    channels: [
      ...new Set(config.filter((c) => c.startsWith("channels.")).map((c) => c.split(".")[1] ?? "")),
    ].filter(Boolean),
  };
}

/** A path inside the skill folder, or a refusal. */
function safePath(raw: string): string {
  if (raw.length > SKILL_LIMITS.pathChars) throw refuse(`${raw.slice(0, 40)}…: path too long`);
  if (raw.includes("\\") || raw.includes("\0")) throw refuse(`${raw}: invalid path`);
  if (raw.startsWith("/") || /^[A-Za-z]:/.test(raw))
    throw refuse(`${raw}: absolute paths are not allowed`);
  const parts = raw.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.some((p) => p === "..")) throw refuse(`${raw}: path leaves the skill folder`);
  if (parts.length === 0) throw refuse(`${raw}: invalid path`);
  return parts.join("/");
}

const isExecutable = (data: Buffer, mode: number) =>
  (mode & 0o111) !== 0 ||
  (data.length >= 2 && data[0] === 0x23 && data[1] === 0x21) || // #!
  (data.length >= 4 && data.readUInt32BE(0) === 0x7f454c46); // ELF

interface RawFile {
  path: string;
  data: Buffer;
  mode: number;
}

function build(files: RawFile[]): SkillPackage {
  if (files.length > SKILL_LIMITS.files) {
    throw refuse(`more than ${SKILL_LIMITS.files} files`);
  }
  const total = files.reduce((n, f) => n + f.data.length, 0);
  if (total > SKILL_LIMITS.totalBytes)
    throw refuse(`more than ${SKILL_LIMITS.totalBytes} bytes unpacked`);
  const seen = new Set<string>();
  for (const f of files) {
    if (seen.has(f.path)) throw refuse(`${f.path}: duplicate path`);
    seen.add(f.path);
  }
  const skillFile = files.find((f) => f.path === "SKILL.md");
  if (!skillFile) throw refuse("SKILL.md missing at the root of the skill folder");
  if (skillFile.data.length > SKILL_LIMITS.skillMdBytes) {
    throw refuse(`SKILL.md larger than ${SKILL_LIMITS.skillMdBytes} bytes`);
  }
  const skillMd = skillFile.data.toString("utf8");
  const { frontmatter } = parseSkillMd(skillMd);
  const declared = new Set((frontmatter.metadata?.platform?.executables ?? []).map(safePath));
  for (const f of files) {
    if (isExecutable(f.data, f.mode) && !declared.has(f.path)) {
      throw refuse(`${f.path}: executable files must be declared in metadata.platform.executables`);
    }
  }
  const ordered: ZipInput[] = [...files]
    .sort((a, b) =>
      a.path === "SKILL.md" ? -1 : b.path === "SKILL.md" ? 1 : a.path < b.path ? -1 : 1,
    )
    .map((f) => ({ path: f.path, data: f.data, mode: declared.has(f.path) ? 0o755 : 0o644 }));
  const archive = writeZip(ordered);
  return {
    name: frontmatter.name,
    version: frontmatter.version,
    description: frontmatter.description,
    category: frontmatter.metadata?.platform?.category ?? "general",
    requirements: requirementsOf(frontmatter),
    skillMd,
    archive,
    sha256: createHash("sha256").update(archive).digest("hex"),
    sizeBytes: total,
    fileCount: files.length,
  };
}

/** A skill from its SKILL.md text alone (the publish form). */
export function packageFromSkillMd(text: string): SkillPackage {
  return build([{ path: "SKILL.md", data: Buffer.from(text, "utf8"), mode: 0o644 }]);
}

/** A skill from a zip archive: SKILL.md at its root, or inside one top-level folder. */
export function packageFromZip(bytes: Buffer): SkillPackage {
  if (bytes.length > SKILL_LIMITS.archiveBytes) {
    throw refuse(`archive larger than ${SKILL_LIMITS.archiveBytes} bytes`);
  }
  try {
    const entries = readZip(bytes);
    if (entries.length > SKILL_LIMITS.files * 2)
      throw refuse(`more than ${SKILL_LIMITS.files} files`);
    const files: RawFile[] = [];
    let budget: number = SKILL_LIMITS.totalBytes;
    for (const entry of entries) {
      const path = safePath(entry.path);
      const type = entry.mode & 0o170000;
      if (type === 0o120000) throw refuse(`${path}: symbolic links are not allowed`);
      if (entry.isDirectory) continue;
      if (type !== 0 && type !== 0o100000) throw refuse(`${path}: only regular files are allowed`);
      if (entry.uncompressedSize > SKILL_LIMITS.fileBytes) {
        throw refuse(`${path}: larger than ${SKILL_LIMITS.fileBytes} bytes`);
      }
      if (entry.uncompressedSize > budget)
        throw refuse(`more than ${SKILL_LIMITS.totalBytes} bytes unpacked`);
      const data = entry.read(Math.min(SKILL_LIMITS.fileBytes, budget));
      budget -= data.length;
      files.push({ path, data, mode: entry.mode & 0o777 });
    }
    // One wrapping folder (what zipping a folder gives) is the skill folder itself.
    const tops = new Set(files.map((f) => f.path.split("/")[0]));
    const [top] = [...tops];
    if (tops.size === 1 && top && files.every((f) => f.path.includes("/"))) {
      for (const f of files) f.path = f.path.slice(top.length + 1);
    }
    return build(files);
  } catch (error) {
    if (error instanceof ZipError) throw refuse(error.message);
    throw error;
  }
}

/** The files of a stored (already checked) archive. */
export function filesOfArchive(archive: Buffer): Array<{ path: string; size: number }> {
  return readZip(archive)
    .filter((e) => !e.isDirectory)
    .map((e) => ({ path: e.path, size: e.uncompressedSize }));
}

/** Numeric parts of a checked version, for ordering. */
export function versionParts(version: string): [number, number, number] {
  const m = SEMVER.exec(version);
  if (!m) throw refuse(`version ${version} is not MAJOR.MINOR.PATCH`);
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

export function compareVersions(a: string, b: string): number {
  const [x, y] = [versionParts(a), versionParts(b)];
  return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
}
