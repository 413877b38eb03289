import { z } from "zod";
import { complete, withOverhead } from "../server/ai/completions.server.ts";
import { taskTypes } from "../server/ai/selection.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import { json, OVERHEAD_HEADER, overheadMs } from "../server/platform/http.server.ts";

const message = z.object({
  role: z.enum(["user", "assistant", "system"]),
  content: z.string(),
});

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Chat completion through the unified AI layer",
    description:
      "The provider's own response is passed through. model is auto-selected from taskType when omitted. 404 when no model is available, 502 when every provider failed.",
    // It spends money, so it needs an API key or a session and bills the caller's credits (or
    // their own key): docs/decisions/0023-ai-chat-requires-credentials.md.
    auth: "user",
    body: z.object({
      messages: z.array(message, { error: "messages is required" }).min(1, "must not be empty"),
      model: z.string().trim().min(1).optional(),
      taskType: z.enum(taskTypes).optional(),
      temperature: z.number().min(0).max(2).optional(),
      top_p: z.number().min(0).max(1).optional(),
      max_tokens: z.number().int().positive().optional(),
    }),
    overheadHeader: true,
    handler: ({ body, request, auth, startedAt }) =>
      withOverhead(startedAt, async (upstream) => {
        const { taskType, ...rest } = body;
        const result = await complete({
          endpoint: "chat",
          userId: auth.user.id,
          instanceId: null,
          body: { ...rest, model: rest.model ?? "" },
          taskType,
          stream: false,
          signal: request.signal,
          startedAt,
          upstream,
        });
        if (result.kind !== "json") throw new Error("unexpected stream");
        return json(result.completion.native, {
          headers: {
            "x-ai-provider": result.model.provider,
            "x-ai-model": result.model.id,
            [OVERHEAD_HEADER]: overheadMs(result.overheadMs),
          },
        });
      }),
  }),
});
