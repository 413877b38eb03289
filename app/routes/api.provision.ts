import { z } from "zod";
import { provisionChannels } from "../server/agents/channel-provisioning.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

const token = z.string().trim().max(512).optional();
const id = z.string().trim().max(128).optional();

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Provision the user's agent with messaging channels and a live stream",
    description:
      "At least one channel token; each is checked with its channel's API (400 naming the channel when refused). Creates or updates the user's instance, applies the channels to its gateway, and creates the agent's live stream. 502 when a provider or the gateway is unavailable (nothing is kept); 503 when streaming is not configured.",
    auth: "user",
    permission: "agents.provision",
    rateLimit: "provision",
    body: z.object({
      chatapp1Token: token,
      chatapp1UserId: id,
      chatapp2BotToken: token,
      chatapp2GuildId: id,
      chatapp2ChannelId: id,
      chatapp3Token: token,
      chatapp3PhoneNumberId: id,
      chatapp3BusinessAccountId: id,
      aiProvider: z.string().max(32).optional(),
      apiKey: z.string().max(512).optional(),
      plan: z.string().max(32).optional(),
    }),
    handler: ({ auth, body }) => provisionChannels(auth.user.id, body),
  }),
});
