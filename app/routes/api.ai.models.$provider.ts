import { z } from "zod";
import { providerModels } from "../server/ai/models.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The models of one provider",
    description: "400 for a malformed provider name, 404 for an unknown or unconfigured one.",
    auth: "none",
    params: z.object({
      provider: z
        .string()
        .regex(/^[a-z0-9][a-z0-9-]{0,39}$/, "must be a provider name (lowercase letters)"),
    }),
    handler: async ({ params }) => ({
      ...(await providerModels(params.provider)),
      timestamp: new Date().toISOString(),
    }),
  }),
});
