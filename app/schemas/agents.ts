import { z } from "zod";

// Form schemas of the agents dashboard, shared by the page actions (server) and conform on the
// client, so they must not import server modules.

export const TIER_IDS = ["starter", "pro", "enterprise"] as const;
export const LOG_LEVELS = ["info", "warning", "error", "debug"] as const;

/** The `custom` model: the agent uses its instance's default model. */
export const CUSTOM_MODEL = "custom";

export const provisionFormSchema = z.object({
  name: z
    .string({ error: "Name is required" })
    .trim()
    .min(1, "Name is required")
    .max(100, "At most 100 characters"),
  model: z.string({ error: "Choose a model" }).trim().min(1, "Choose a model").max(200),
  tier: z.enum(TIER_IDS).optional(),
});

/** Serialized size cap of an agent's configuration (the API's cap). */
export const CONFIG_MAX_BYTES = 64 * 1024;

const utf8Bytes = (text: string) => new TextEncoder().encode(text).length;

/** The configuration editor: a JSON object of at most CONFIG_MAX_BYTES (as compact JSON). */
export const configFormSchema = z.object({
  config: z.string({ error: "Enter a JSON object" }).transform((text, ctx) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      ctx.addIssue({ code: "custom", message: `Not valid JSON: ${(error as Error).message}` });
      return z.NEVER;
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      ctx.addIssue({ code: "custom", message: "The configuration must be a JSON object" });
      return z.NEVER;
    }
    // Measured as the API measures it: the compact JSON, so indentation costs nothing.
    if (utf8Bytes(JSON.stringify(parsed)) > CONFIG_MAX_BYTES) {
      ctx.addIssue({
        code: "custom",
        message: `The configuration is larger than ${CONFIG_MAX_BYTES / 1024} KiB`,
      });
      return z.NEVER;
    }
    return parsed as Record<string, unknown>;
  }),
});
