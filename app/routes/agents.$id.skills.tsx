import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { useActionData, useLoaderData } from "@remix-run/react";
import { AgentSkills } from "../components/agent-skills.tsx";
import { requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import { getOwnedAgent } from "../server/agents/agents.server.ts";
import { skillsPage, skillsPageActions } from "../server/agents/chat-page.server.ts";
import { pageError } from "../server/agents/pages.server.ts";
import { updateSkill } from "../server/agents/talk.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

// An agent's skills tab: the skills that can work on it, all of them on demand.

export const meta: MetaFunction = () => [{ title: "Skills — Agent Platform" }];

export async function loader({ request, params }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  const agent = await getOwnedAgent(user.id, String(params.id)).catch(pageError);
  const all = new URL(request.url).searchParams.get("all") === "1";
  return skillsPage(user, agent, all);
}

export const action = /* @__PURE__ */ formAction({
  schema: skillsPageActions,
  access: signedIn,
  handler: async ({ params, session: { user }, value }) => {
    const agent = await getOwnedAgent(user.id, String(params.id)).catch(pageError);
    await updateSkill(user.id, value.skillId, value.enabled === "true", agent.id);
    return { message: `Skill ${value.skillId} turned ${value.enabled === "true" ? "on" : "off"}` };
  },
});

export default function AgentSkillsRoute() {
  return <AgentSkills d={useLoaderData<typeof loader>()} reply={useActionData<typeof action>()} />;
}
