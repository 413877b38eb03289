import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { useActionData, useLoaderData } from "@remix-run/react";
import { AgentChat, type ChatAnswer } from "../components/agent-chat.tsx";
import { InstalledSkills } from "../components/installed-skills.tsx";
import { limitByIp, requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import { getOwnedAgent } from "../server/agents/agents.server.ts";
import { provisionChannels } from "../server/agents/channel-provisioning.server.ts";
import { setCredential } from "../server/agents/channels.server.ts";
import { chatPage, chatPageActions } from "../server/agents/chat-page.server.ts";
import { chat, createSession, updateSkill } from "../server/agents/talk.server.ts";
import { startWhatsAppLink, waitWhatsAppLink } from "../server/agents/whatsapp-link.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";
import {
  installedOnAgent,
  removeSkill,
  updateSkillVersion,
} from "../server/skills/installs.server.ts";

// An agent's chat page; everything goes through the same services as /api/agent.

export const meta: MetaFunction = () => [{ title: "Chat — Agent Platform" }];

/** The user's agent, or the page's 404. */
const ownedAgent = (userId: string, id: string | undefined) =>
  getOwnedAgent(userId, String(id)).catch(() => {
    throw new Response("Agent not found", { status: 404 });
  });

export async function loader({ request, params }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  const agent = await ownedAgent(user.id, params.id);
  const selected = new URL(request.url).searchParams.get("session") ?? undefined;
  const [page, installed] = await Promise.all([
    chatPage(user, agent, selected),
    installedOnAgent(user.id, agent.id),
  ]);
  return { ...page, installed };
}

const linkAnswer = (link: { linked: boolean; message: string; qrDataUrl: string | null }) => ({
  message: link.linked ? "WhatsApp is linked" : link.message,
  whatsapp: { linked: link.linked, qrDataUrl: link.qrDataUrl },
});

export const action = /* @__PURE__ */ formAction({
  schema: chatPageActions,
  access: signedIn,
  handler: async ({ request, context, params, session: { user }, value }): Promise<ChatAnswer> => {
    const agentId = (await ownedAgent(user.id, params.id)).id;
    switch (value.intent) {
      case "chat": {
        const { message, sessionId } = value;
        const turn = await chat(user.id, { message, agentId, ...(sessionId ? { sessionId } : {}) });
        return { reply: turn.reply, sessionId: turn.sessionId };
      }
      case "new-session": {
        const created = await createSession(user.id, agentId);
        return { sessionId: created.sessionId, message: "New session started" };
      }
      case "skill":
        await updateSkill(user.id, value.skillId, value.enabled === "true", agentId);
        return { message: `Skill ${value.skillId} updated` };
      case "credential":
        await setCredential(user.id, value.key, value.value);
        return { message: `${value.key} configured` };
      case "channels":
        await limitByIp(request, context, "provision");
        await provisionChannels(user.id, {
          chatapp1Token: value.chatapp1Token,
          chatapp2BotToken: value.chatapp2BotToken,
          chatapp3Token: value.chatapp3Token,
        });
        return { message: "Channels saved; the live stream is ready" };
      case "whatsapp-link":
        return linkAnswer(await startWhatsAppLink(user.id, { force: value.force === "true" }));
      case "skill-update": {
        const done = await updateSkillVersion(user.id, { name: value.name, agentId });
        return { message: `${value.name} is at version ${done.version}` };
      }
      case "skill-remove":
        await removeSkill(user.id, { name: value.name, agentId });
        return { message: `${value.name} removed` };
      case "whatsapp-wait": {
        const current = value.currentQrDataUrl;
        return linkAnswer(
          await waitWhatsAppLink(user.id, current ? { currentQrDataUrl: current } : {}),
        );
      }
    }
  },
});

export default function AgentChatRoute() {
  const d = useLoaderData<typeof loader>();
  return (
    <AgentChat
      d={d}
      reply={useActionData<typeof action>()}
      extra={<InstalledSkills installed={d.installed} />}
    />
  );
}
