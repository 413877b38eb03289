import { z } from "zod";
import { agentCompletion } from "../server/ai/agents-endpoint.server.ts";
import type { ChatBody } from "../server/ai/providers/shared.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "OpenAI-compatible chat completions for hosted agents (per-instance token)",
    description:
      "Authorization: Bearer <instance token>. Streams server-sent events when stream is true. 400 `unsupported parameter: <name>` for a parameter the platform does not price (OpenRouter's `models`, `plugins`, `provider`; OpenAI's `service_tier`, audio, predictions, web search), 401 without a valid token, 402 over the daily limit or without credits, 404 for an unknown model, 502 when every provider failed. x-overhead-ms tells the platform's own time. `platform_agent` (sent by the gateway config) names the agent the call is metered for, an agent of the token's owner only; it never reaches the provider.",
    auth: "none",
    body: z.looseObject({
      model: z.string().trim().min(1),
      messages: z.array(z.looseObject({ role: z.string().min(1) })).min(1, "must not be empty"),
      stream: z.boolean().optional(),
      max_tokens: z.number().int().positive().optional(),
      temperature: z.number().optional(),
      top_p: z.number().optional(),
    }),
    overheadHeader: true,
    handler: ({ request, body, startedAt }) =>
      agentCompletion(request, body as ChatBody, startedAt),
  }),
});
