import { z } from "zod";
import { configFormSchema, provisionFormSchema } from "./agents.ts";

// The agent's settings tab (issue 25: configuration as forms), shared by the page action and
// conform on the client: client-safe, no server imports.

export const PERSONA_MAX_CHARS = 2000;

/** OpenClaw durations as people write them: 30m, 2h, 1h30m (0m turns the heartbeat off). */
const DURATION = /^(?:\d+h)?(?:\d+m)?$/;

export const agentSettingsActions = z.discriminatedUnion("intent", [
  z.object({
    intent: z.literal("profile"),
    name: provisionFormSchema.shape.name,
    model: provisionFormSchema.shape.model,
    persona: z
      .string()
      .trim()
      .max(PERSONA_MAX_CHARS, `At most ${PERSONA_MAX_CHARS} characters`)
      .optional(),
  }),
  z.object({
    intent: z.literal("access"),
    telegramOwner: z
      .string()
      .trim()
      .regex(/^\d{1,20}$/, "A Telegram user id is a number (ask @userinfobot for yours)")
      .optional(),
  }),
  z.object({
    intent: z.literal("heartbeat"),
    enabled: z.literal("on").optional(),
    every: z
      .string({ error: "Enter how often, like 30m or 2h" })
      .trim()
      .regex(DURATION, "Write it like 30m, 2h or 1h30m")
      .refine((v) => v !== "", "Enter how often, like 30m or 2h"),
  }),
  configFormSchema.extend({ intent: z.literal("config") }),
]);
