import { micromark } from "micromark";
import { listAgents } from "../agents/agents.server.ts";
import { withGateway } from "../agents/instance-gateway.server.ts";
import { getInstanceByUser } from "../agents/instances.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { skillsStatus } from "./gateway-skills.server.ts";
import { syncShippedSkills } from "./shipped.server.ts";
import { parseSkillMd, type Requirements } from "./skill-package.server.ts";

// The marketplace catalog (GET /api/skills): the platform's shipped skills, users' published
// skills (public ones once approved, private ones for their publisher only) and the skills
// bundled with the caller's gateway, each with its installs and, per agent of the caller,
// whether it is installed and enabled. docs/decisions/0110-skills-api.md

export type SkillSource = "platform" | "user" | "bundled";

export interface AgentSkillState {
  agentId: string;
  agentName: string;
  installed: boolean;
  enabled: boolean;
  version: string | null;
}

export interface CatalogEntry {
  name: string;
  version: string;
  description: string;
  category: string;
  source: SkillSource;
  visibility: "public" | "private";
  publisher: { id: string | null; name: string };
  requirements: Requirements;
  installs: number;
  /** Public user versions: false until an operator approves it (only their publisher sees it). */
  approved: boolean;
  createdAt: string;
  agents: AgentSkillState[];
}

export interface CatalogQuery {
  q?: string | undefined;
  category?: string | undefined;
  source?: SkillSource | undefined;
  mine?: boolean | undefined;
  sort: "installs" | "newest" | "name";
  limit: number;
  offset: number;
}

interface VersionRow {
  skill_id: string;
  name: string;
  source: "platform" | "user";
  publisher_id: string | null;
  publisher_name: string | null;
  visibility: "public" | "private";
  category: string;
  version_id: string;
  version: string;
  description: string;
  requirements: Requirements;
  approved_at: Date | null;
  created_at: Date;
  skill_created_at: Date;
  installs: number;
}

/**
 * The version of each skill `viewerId` may see: the newest listed one, approved unless the
 * viewer published it (or it is the platform's). `name` narrows to one skill.
 */
async function visibleVersions(viewerId: string | undefined, name?: string): Promise<VersionRow[]> {
  await syncShippedSkills();
  const viewer = viewerId ?? null;
  return db()<VersionRow[]>`
    select distinct on (s.id)
      s.id as skill_id, s.name, s.source, s.publisher_id, u.name as publisher_name, s.visibility,
      s.category, v.id as version_id, v.version, v.description, v.requirements, v.approved_at,
      v.created_at, s.created_at as skill_created_at,
      (select count(*)::int from skill_installs i where i.skill_id = s.id) as installs
    from skills s
    join skill_versions v on v.skill_id = s.id and v.unlisted_at is null
    left join users u on u.id = s.publisher_id
    where (${name ?? null}::text is null or s.name = ${name ?? null})
      and (
        s.source = 'platform'
        or s.publisher_id = ${viewer}
        or (s.visibility = 'public' and v.approved_at is not null)
      )
    order by s.id, v.major desc, v.minor desc, v.patch desc
    limit 5000`;
}

async function agentStates(userId: string | undefined) {
  if (!userId)
    return {
      agents: [],
      installs: new Map<string, Map<string, { enabled: boolean; version: string }>>(),
    };
  const agents = await listAgents(userId);
  const rows = await db()<
    { agent_id: string; skill_id: string; enabled: boolean; version: string }[]
  >`
    select i.agent_id, i.skill_id, i.enabled, v.version
    from skill_installs i join skill_versions v on v.id = i.version_id
    where i.user_id = ${userId}`;
  const installs = new Map<string, Map<string, { enabled: boolean; version: string }>>();
  for (const r of rows) {
    const bySkill = installs.get(r.skill_id) ?? new Map();
    bySkill.set(r.agent_id, { enabled: r.enabled, version: r.version });
    installs.set(r.skill_id, bySkill);
  }
  return { agents, installs };
}

function entryOf(row: VersionRow, agents: Awaited<ReturnType<typeof agentStates>>): CatalogEntry {
  const mine = agents.installs.get(row.skill_id);
  return {
    name: row.name,
    version: row.version,
    description: row.description,
    category: row.category,
    source: row.source,
    visibility: row.visibility,
    publisher:
      row.source === "platform"
        ? { id: null, name: "Platform" }
        : { id: row.publisher_id, name: row.publisher_name ?? "unknown" },
    requirements: row.requirements,
    installs: row.installs,
    approved: row.source === "platform" || row.visibility === "private" || row.approved_at !== null,
    createdAt: row.created_at.toISOString(),
    agents: agents.agents.map((a) => {
      const state = mine?.get(a.id);
      return {
        agentId: a.id,
        agentName: a.name,
        installed: Boolean(state),
        enabled: state?.enabled ?? false,
        version: state?.version ?? null,
      };
    }),
  };
}

/**
 * The skills bundled with the caller's gateway, from its skills.status per agent; empty when the
 * caller has no instance, undefined when the gateway does not answer (the list says so).
 */
async function bundledEntries(userId: string | undefined): Promise<CatalogEntry[] | undefined> {
  if (!userId || !(await getInstanceByUser(userId))) return [];
  const agents = await listAgents(userId);
  if (agents.length === 0) return [];
  try {
    return await withGateway(userId, async (client) => {
      const version = client.hello?.server.version ?? "bundled";
      const perAgent = await Promise.all(
        agents.map(async (a) => ({
          agent: a,
          status: await skillsStatus(client, a.gateway_agent_id),
        })),
      );
      const byName = new Map<string, CatalogEntry>();
      for (const { agent, status } of perAgent) {
        for (const s of status.skills) {
          if (!s.bundled && s.source !== "openclaw-bundled") continue;
          const name = s.name ?? s.skillKey;
          const requires =
            (s as { requirements?: Partial<Record<string, string[]>> }).requirements ?? {};
          const entry = byName.get(name) ?? {
            name,
            version,
            description: s.description ?? "",
            category: "general",
            source: "bundled" as const,
            visibility: "public" as const,
            publisher: { id: null, name: "OpenClaw" },
            requirements: {
              bins: [...(requires.bins ?? []), ...(requires.anyBins ?? [])],
              env: requires.env ?? [],
              config: (requires.config ?? []).filter((c) => !c.startsWith("channels.")),
              channels: (requires.config ?? [])
                .filter((c) => c.startsWith("channels."))
                .map((c) => c.split(".")[1] ?? ""),
            },
            installs: 0,
            approved: true,
            createdAt: new Date(0).toISOString(),
            agents: [],
          };
          entry.agents.push({
            agentId: agent.id,
            agentName: agent.name,
            installed: true,
            enabled: !s.disabled && s.eligible === true,
            version,
          });
          byName.set(name, entry);
        }
      }
      return [...byName.values()];
    });
  } catch (error) {
    logger().debug({ err: error, userId }, "bundled skills unavailable");
    return undefined;
  }
}

/** GET /api/skills: search, category, source, sort and paging over the whole catalog. */
export async function listCatalog(userId: string | undefined, query: CatalogQuery) {
  const wantBundled = !query.mine && (query.source === undefined || query.source === "bundled");
  const [rows, agents, bundled] = await Promise.all([
    query.source === "bundled" ? Promise.resolve([]) : visibleVersions(userId),
    agentStates(userId),
    wantBundled ? bundledEntries(userId) : Promise.resolve([]),
  ]);
  let entries = rows
    .filter((r) => (query.mine ? r.publisher_id === userId && userId !== undefined : true))
    .filter((r) => (query.source ? r.source === query.source : true))
    .map((r) => entryOf(r, agents));
  // A published skill that shadows a bundled one by name is listed once, as published.
  const names = new Set(entries.map((e) => e.name));
  entries = [...entries, ...(bundled ?? []).filter((b) => !names.has(b.name))];
  const q = query.q?.trim().toLowerCase();
  if (q) entries = entries.filter((e) => `${e.name} ${e.description}`.toLowerCase().includes(q));
  if (query.category) entries = entries.filter((e) => e.category === query.category);
  entries.sort((a, b) =>
    query.sort === "installs"
      ? b.installs - a.installs || a.name.localeCompare(b.name)
      : query.sort === "newest"
        ? b.createdAt.localeCompare(a.createdAt) || a.name.localeCompare(b.name)
        : a.name.localeCompare(b.name),
  );
  return {
    skills: entries.slice(query.offset, query.offset + query.limit),
    total: entries.length,
    limit: query.limit,
    offset: query.offset,
    bundledAvailable: bundled !== undefined,
  };
}

export interface SkillDetail extends CatalogEntry {
  skillMd: string;
  /** SKILL.md's body rendered to HTML: markdown only, raw HTML escaped, unsafe links dropped. */
  html: string;
  versions: Array<{ version: string; createdAt: string; approved: boolean; unlisted: boolean }>;
}

/** One skill the caller may see (404 otherwise), with its SKILL.md and versions. */
export async function skillDetail(userId: string | undefined, name: string): Promise<SkillDetail> {
  const [row] = await visibleVersions(userId, name);
  if (!row) throw new DomainError(404, "Skill not found");
  const [agents, [version]] = await Promise.all([
    agentStates(userId),
    db()<{ skill_md: string }[]>`select skill_md from skill_versions where id = ${row.version_id}`,
  ]);
  const mine = row.publisher_id !== null && row.publisher_id === userId;
  const versions = await db()<
    { version: string; created_at: Date; approved_at: Date | null; unlisted_at: Date | null }[]
  >`
    select version, created_at, approved_at, unlisted_at from skill_versions
    where skill_id = ${row.skill_id}
      and (${mine} or (unlisted_at is null and (approved_at is not null or ${row.source === "platform" || row.visibility === "private"})))
    order by major desc, minor desc, patch desc`;
  const skillMd = version?.skill_md ?? "";
  return {
    ...entryOf(row, agents),
    skillMd,
    html: renderMarkdown(parseSkillMd(skillMd).body),
    versions: versions.map((v) => ({
      version: v.version,
      createdAt: v.created_at.toISOString(),
      approved: row.source === "platform" || row.visibility === "private" || v.approved_at !== null,
      unlisted: v.unlisted_at !== null,
    })),
  };
}

/** Markdown to HTML with micromark's defaults: HTML in the source is escaped, never passed on. */
export function renderMarkdown(markdown: string): string {
  return micromark(markdown, { allowDangerousHtml: false, allowDangerousProtocol: false });
}
