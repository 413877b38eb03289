import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { useActionData, useLoaderData } from "@remix-run/react";
import { AgentSkills } from "../components/agent-skills.tsx";
import { InstalledSkills } from "../components/installed-skills.tsx";
import { getOwnedAgent } from "../server/agents/agents.server.ts";
import { skillsPage, skillsPageActions } from "../server/agents/chat-page.server.ts";
import { pageError } from "../server/agents/pages.server.ts";
import { updateSkill } from "../server/agents/talk-skills.server.ts";
import { ownerMay, pageOwner } from "../server/organisations/page-space.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";
import {
  installedOnAgent,
  removeSkill,
  updateSkillVersion,
} from "../server/skills/installs.server.ts";

// An agent's skills tab: the skills that can work on it, all of them on demand.

export const meta: MetaFunction = () => [{ title: "Skills — Agent Platform" }];

export async function loader({ request, params }: LoaderFunctionArgs) {
  const { user } = await pageOwner(request, "agents.read");
  const agent = await getOwnedAgent(user.id, String(params.id)).catch(pageError);
  const all = new URL(request.url).searchParams.get("all") === "1";
  const [page, installed] = await Promise.all([
    skillsPage(user, agent, all),
    installedOnAgent(user.id, agent.id),
  ]);
  return { ...page, installed };
}

export const action = /* @__PURE__ */ formAction({
  schema: skillsPageActions,
  access: (args) => ownerMay("agents.configure", args),
  handler: async ({ params, session: { user }, value }) => {
    const agent = await getOwnedAgent(user.id, String(params.id)).catch(pageError);
    switch (value.intent) {
      case "skill":
        await updateSkill(user.id, value.skillId, value.enabled === "true", agent.id);
        return {
          message: `Skill ${value.skillId} turned ${value.enabled === "true" ? "on" : "off"}`,
        };
      case "skill-update": {
        const done = await updateSkillVersion(user.id, { name: value.name, agentId: agent.id });
        return { message: `${value.name} is at version ${done.version}` };
      }
      case "skill-remove":
        await removeSkill(user.id, { name: value.name, agentId: agent.id });
        return { message: `${value.name} removed` };
    }
  },
});

export default function AgentSkillsRoute() {
  const d = useLoaderData<typeof loader>();
  return (
    <AgentSkills
      d={d}
      reply={useActionData<typeof action>()}
      extra={<InstalledSkills installed={d.installed} />}
    />
  );
}
