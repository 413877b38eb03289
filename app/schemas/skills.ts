import { z } from "zod";

// Shapes of the skills marketplace API (GET/POST /api/skills, POST /api/skills/:name), shared by
// the API routes (and so the OpenAPI document) and the pages. No server imports.
// docs/decisions/0110-skills-api.md

export const SKILL_SOURCES = ["platform", "user", "bundled"] as const;
export const SKILL_SORTS = ["installs", "newest", "name"] as const;

const skillName = z.string().trim().min(1).max(100);
const agentId = z.string().trim().min(1).max(100);
const version = z
  .string()
  .trim()
  .regex(/^\d+\.\d+\.\d+$/, "must be MAJOR.MINOR.PATCH");
const blank = (v: unknown) => (v === "" ? undefined : v);

export const catalogQuerySchema = z.object({
  q: z.preprocess(blank, z.string().max(200).optional()),
  category: z.preprocess(blank, z.string().max(50).optional()),
  source: z.preprocess(blank, z.enum(SKILL_SOURCES).optional()),
  sort: z.preprocess(blank, z.enum(SKILL_SORTS).default("installs")),
  /** `true`: only the caller's published skills ("my skills"). */
  mine: z.preprocess(blank, z.enum(["true", "false"]).optional()),
  /** One skill in detail: its rendered SKILL.md and versions. */
  name: z.preprocess(blank, skillName.optional()),
  limit: z.preprocess(
    blank,
    z.coerce.number().int("must be an integer").min(1).max(100).default(20),
  ),
  offset: z.preprocess(blank, z.coerce.number().int("must be an integer").min(0).default(0)),
});

export const publishSchema = z.object({
  action: z.literal("publish"),
  /** A zip of the skill folder (SKILL.md at its root or in one top folder), base64. */
  archive: z.string().max(1_000_000).optional(),
  /** Or the SKILL.md text alone. */
  skillMd: z.string().max(70_000).optional(),
  visibility: z.enum(["public", "private"]).default("private"),
});

export const installSchema = z.object({
  action: z.enum(["install", "update"]),
  name: skillName,
  agentId,
  /** Default: the newest version the caller may install. */
  version: version.optional(),
});

export const removeSchema = z.object({
  action: z.literal("remove"),
  name: skillName,
  agentId,
});

export const unlistSchema = z.object({
  action: z.literal("unlist"),
  name: skillName,
  version,
});

export const skillsPostSchema = z.discriminatedUnion("action", [
  publishSchema,
  installSchema,
  removeSchema,
  unlistSchema,
]);

export const useSkillSchema = z.object({
  input: z.string().trim().min(1, "input is required").max(8_000),
  /** Default: the caller's first agent. */
  agentId: agentId.optional(),
  sessionId: z.string().max(300).optional(),
  /** true: the reply as server-sent events (`delta`, then `done` or `error`). */
  stream: z.boolean().optional(),
});

export const skillNameParams = z.object({ name: skillName });

/** The publish form of the marketplace page (SKILL.md text). */
export const publishFormSchema = z.object({
  skillMd: z.string({ error: "Paste the SKILL.md" }).min(1, "Paste the SKILL.md").max(70_000),
  visibility: z.enum(["public", "private"]).default("private"),
});

/** The forms of a skill's page: install, update or remove on an agent; unlist a version. */
export const skillPageActions = z.discriminatedUnion("intent", [
  z.object({ intent: z.enum(["install", "update", "remove"]), agentId }),
  z.object({ intent: z.literal("unlist"), version }),
]);
