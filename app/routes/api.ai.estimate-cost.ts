import { z } from "zod";
import { estimateCost } from "../server/ai/models.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

const tokens = z
  .number({ error: "must be a non-negative number" })
  .finite()
  .nonnegative("must be a non-negative number");

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Estimate the USD cost of a call",
    description: "404 for an unknown model.",
    auth: "none",
    body: z.object({ model: z.string().trim().min(1), inputTokens: tokens, outputTokens: tokens }),
    handler: async ({ body }) => ({
      model: body.model,
      inputTokens: body.inputTokens,
      outputTokens: body.outputTokens,
      estimatedCost: await estimateCost(body.model, body.inputTokens, body.outputTokens),
      currency: "USD",
      timestamp: new Date().toISOString(),
    }),
  }),
});
