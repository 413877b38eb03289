import { z } from "zod";
import { provisionFormSchema } from "./agents.ts";

// The guided first agent (issue 25): name → model → chat app (optional) → provision. The first
// two steps are GET forms (the answers travel in the URL, so it works as plain steps without
// JavaScript); the last one posts everything through formAction. Client-safe: no server imports.

export const ONBOARDING_CHANNELS = ["none", "telegram", "discord"] as const;

export const onboardingName = provisionFormSchema.shape.name;
export const onboardingModel = provisionFormSchema.shape.model;

const token = z.string().trim().max(200, "At most 200 characters").optional();

/** The last step: create the agent (with a checked token when a chat app is chosen). */
export const onboardingActions = z.discriminatedUnion("intent", [
  z.object({
    intent: z.literal("check-token"),
    channel: z.enum(["telegram", "discord"], { error: "Choose Telegram or Discord" }),
    token: z.string({ error: "Paste the bot token" }).trim().min(1, "Paste the bot token").max(200),
  }),
  z
    .object({
      intent: z.literal("create"),
      name: onboardingName,
      model: onboardingModel,
      channel: z.enum(ONBOARDING_CHANNELS).default("none"),
      token,
    })
    .refine((v) => v.channel === "none" || Boolean(v.token), {
      path: ["token"],
      message: "Paste the bot token, or choose “Not now”",
    }),
]);

/** The first message the chat page suggests after onboarding. */
export const FIRST_MESSAGE = "Hi! Introduce yourself and tell me what you can help me with.";
