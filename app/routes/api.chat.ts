import { z } from "zod";
import { listChatMessages, sendChatMessage } from "../server/agents/topic-chat.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";

const body = z.object({
  message: z.string().max(32_000).optional(),
  topic: z.string().max(100).optional(),
});

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The user's sent messages with the agent's replies, newest first",
    auth: "user",
    permission: "agents.read",
    rateLimit: "chat",
    handler: ({ auth }) => listChatMessages(auth.user.id),
  }),
  POST: endpoint({
    summary: "Send a message to the user's agent; the response carries its reply",
    description: "400 without a message; 404 without an instance; 502 when the gateway fails.",
    auth: "user",
    permission: "agents.chat",
    rateLimit: "chat",
    body,
    handler: ({ auth, body }) => {
      const message = body.message?.trim();
      if (!message) throw new DomainError(400, "message is required");
      return sendChatMessage(auth.user.id, {
        message,
        ...(body.topic ? { topic: body.topic } : {}),
      });
    },
  }),
});
