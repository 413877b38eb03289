import { z } from "zod";
import { selectForTask } from "../server/ai/models.server.ts";
import { taskTypes } from "../server/ai/selection.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  POST: endpoint({
    summary: "Pick the model that fits a task type",
    description: `taskType: ${taskTypes.join(", ")} (default general). 404 when no model fits.`,
    auth: "none",
    body: z
      .object({ taskType: z.enum(taskTypes).default("general") })
      .default({ taskType: "general" }),
    handler: async ({ body }) => ({
      model: await selectForTask(body.taskType),
      taskType: body.taskType,
      timestamp: new Date().toISOString(),
    }),
  }),
});
