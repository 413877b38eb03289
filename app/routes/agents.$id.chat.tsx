import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { useActionData, useLoaderData } from "@remix-run/react";
import { AgentChat, type ChatAnswer } from "../components/agent-chat.tsx";
import { getOwnedAgent } from "../server/agents/agents.server.ts";
import { chatPage, chatPageActions } from "../server/agents/chat-page.server.ts";
import { chat } from "../server/agents/talk.server.ts";
import { createSession } from "../server/agents/talk-sessions.server.ts";
import { ownerMay, pageOwner } from "../server/organisations/page-space.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

// An agent's chat page; everything goes through the same services as /api/agent.

export const meta: MetaFunction = () => [{ title: "Chat — Agent Platform" }];

/** The user's agent, or the page's 404. */
const ownedAgent = (userId: string, id: string | undefined) =>
  getOwnedAgent(userId, String(id)).catch(() => {
    throw new Response("Agent not found", { status: 404 });
  });

export async function loader({ request, params }: LoaderFunctionArgs) {
  const { user } = await pageOwner(request, "agents.read");
  const agent = await ownedAgent(user.id, params.id);
  const selected = new URL(request.url).searchParams.get("session") ?? undefined;
  return chatPage(user, agent, selected);
}

export const action = /* @__PURE__ */ formAction({
  schema: chatPageActions,
  access: (args) => ownerMay("agents.chat", args),
  handler: async ({ params, session: { user, person }, value }): Promise<ChatAnswer> => {
    const agentId = (await ownedAgent(user.id, params.id)).id;
    switch (value.intent) {
      case "chat": {
        const { message, sessionId } = value;
        const turn = await chat(
          user.id,
          { message, agentId, ...(sessionId ? { sessionId } : {}) },
          {},
          { personId: person.id },
        );
        return { reply: turn.reply, sessionId: turn.sessionId };
      }
      case "new-session": {
        const created = await createSession(user.id, agentId);
        return { sessionId: created.sessionId, message: "New session started" };
      }
    }
  },
});

export default function AgentChatRoute() {
  return <AgentChat d={useLoaderData<typeof loader>()} reply={useActionData<typeof action>()} />;
}
