import { catalogQuerySchema, skillsPostSchema } from "../schemas/skills.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { json } from "../server/platform/http.server.ts";
import { listCatalog, skillDetail } from "../server/skills/catalog.server.ts";
import { installSkill, removeSkill, updateSkillVersion } from "../server/skills/installs.server.ts";
import { publishSkill, unlistVersion } from "../server/skills/publishing.server.ts";

// The skills marketplace: the catalog (GET) and publish / install / update / remove / unlist
// (POST by `action`). docs/decisions/0110-skills-api.md

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The skills marketplace: search, filter, sort and page; or one skill by name",
    description:
      "Each entry: name, version, description, category, source (platform, user, bundled), publisher, requirements {bins, env, config, channels}, installs and, per agent of the caller, whether it is installed and enabled. `name` answers one skill with its rendered SKILL.md and versions (404 when the caller may not see it). Signed-out callers see the public catalog.",
    auth: "optional",
    permission: "agents.read",
    rateLimit: "agents",
    query: catalogQuerySchema,
    handler: async ({ auth, query }) => {
      const userId = auth?.user.id;
      if (query.name) return { skill: await skillDetail(userId, query.name) };
      return listCatalog(userId, {
        q: query.q,
        category: query.category,
        source: query.source,
        mine: query.mine === "true",
        sort: query.sort,
        limit: query.limit,
        offset: query.offset,
      });
    },
  }),
  POST: endpoint({
    summary: "Publish a skill, or install, update or remove one on an agent, or unlist a version",
    description:
      "`publish`: archive (zip, base64) or skillMd; 201 `{name, version, visibility, status}`; 400 names what is wrong with the skill, 409 a taken name or an existing version. `install` / `update`: name, agentId, version?; 400 names unmet requirements; 404 unknown skill or agent; 502 gateway down. `remove`: name, agentId. `unlist`: name, version (the caller's skill).",
    auth: "user",
    permission: "agents.configure",
    rateLimit: "agents",
    body: skillsPostSchema,
    handler: async ({ auth, body }) => {
      const userId = auth.user.id;
      switch (body.action) {
        case "publish":
          return json(await publishSkill(userId, body), { status: 201 });
        case "install":
          return installSkill(userId, body);
        case "update":
          return updateSkillVersion(userId, body);
        case "remove":
          return removeSkill(userId, body);
        case "unlist":
          return unlistVersion(userId, body.name, body.version);
      }
    },
  }),
});
