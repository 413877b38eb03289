import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { useActionData, useLoaderData } from "@remix-run/react";
import { AgentChannels, type ChannelsAnswer } from "../components/agent-channels.tsx";
import { limitByIp } from "../server/accounts/pages.server.ts";
import { getOwnedAgent } from "../server/agents/agents.server.ts";
import { provisionChannels } from "../server/agents/channel-provisioning.server.ts";
import { setCredential } from "../server/agents/channels.server.ts";
import { channelsPage, channelsPageActions } from "../server/agents/chat-page.server.ts";
import { pageError } from "../server/agents/pages.server.ts";
import { startWhatsAppLink, waitWhatsAppLink } from "../server/agents/whatsapp-link.server.ts";
import { ownerMay, pageOwner } from "../server/organisations/page-space.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

// An agent's channels tab: keys, chat apps (WhatsApp's QR link) and the live stream, through
// the same services as /api/agent.

export const meta: MetaFunction = () => [{ title: "Channels — Agent Platform" }];

export async function loader({ request, params }: LoaderFunctionArgs) {
  const { user } = await pageOwner(request, "agents.read");
  const agent = await getOwnedAgent(user.id, String(params.id)).catch(pageError);
  return channelsPage(user, agent);
}

const linkAnswer = (link: { linked: boolean; message: string; qrDataUrl: string | null }) => ({
  message: link.linked ? "WhatsApp is linked" : link.message,
  whatsapp: { linked: link.linked, qrDataUrl: link.qrDataUrl },
});

export const action = /* @__PURE__ */ formAction({
  schema: channelsPageActions,
  access: (args) => ownerMay("credentials.manage", args),
  handler: async ({
    request,
    context,
    params,
    session: { user },
    value,
  }): Promise<ChannelsAnswer> => {
    await getOwnedAgent(user.id, String(params.id)).catch(pageError);
    switch (value.intent) {
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
      case "whatsapp-wait": {
        const current = value.currentQrDataUrl;
        return linkAnswer(
          await waitWhatsAppLink(user.id, current ? { currentQrDataUrl: current } : {}),
        );
      }
    }
  },
});

export default function AgentChannelsRoute() {
  return (
    <AgentChannels d={useLoaderData<typeof loader>()} reply={useActionData<typeof action>()} />
  );
}
