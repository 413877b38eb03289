import { CUSTOM_MODEL } from "../../schemas/agents.ts";
import { FIRST_MESSAGE } from "../../schemas/onboarding.ts";
import { frontendModels } from "../ai/models.server.ts";
import { selfHosted } from "../billing/plan-assignments.server.ts";
import { hasActiveSubscription } from "../billing/subscriptions.server.ts";
import { discordCurrentApplication } from "../channels/discord.server.ts";
import { CredentialRejected, ServiceUnavailable } from "../channels/http.server.ts";
import { telegramGetMe } from "../channels/telegram.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { logger } from "../platform/logger.server.ts";
import { type Channel, storeChannelCredential } from "./channels.server.ts";
import { provisionFromPage } from "./pages.server.ts";

// The guided first agent (issue 25, app/routes/welcome.tsx): what each step offers, the bot
// token check on the spot, and the final provision. docs/decisions/0136-onboarding.md

export interface ModelOffer {
  id: string;
  name: string;
  description: string;
  featured: boolean;
  /** USD per million tokens, in and out (null: billed at the instance's default model). */
  perMillion: { prompt: number; completion: number } | null;
}

/** The models the provision form accepts, with what a million tokens costs (featured first). */
export async function modelOffers(): Promise<ModelOffer[]> {
  const custom: ModelOffer = {
    id: CUSTOM_MODEL,
    name: "The instance's default model",
    description: "Whatever model the server's operator configured as the default.",
    featured: false,
    perMillion: null,
  };
  try {
    const models = await frontendModels();
    return [
      ...models.map((m) => ({
        id: m.id,
        name: m.name,
        description: m.description,
        featured: m.featured,
        perMillion: {
          prompt: m.pricing.prompt * 1_000_000,
          completion: m.pricing.completion * 1_000_000,
        },
      })),
      custom,
    ];
  } catch (error) {
    logger().warn({ err: error }, "model catalog unavailable: onboarding offers the default only");
    return [custom];
  }
}

/** What the onboarding page needs before its steps: can this user provision at all? */
export async function onboardingState(userId: string) {
  const [subscribed, models] = await Promise.all([hasActiveSubscription(userId), modelOffers()]);
  return { subscribed, selfHosted: selfHosted(), models };
}

const CHANNEL_OF = { telegram: "chatapp1", discord: "chatapp2" } as const satisfies Record<
  string,
  Channel
>;

/**
 * Checks a bot token with its chat app and answers the bot's name; a refused token is a 400 on
 * the `token` field, an app that does not answer a 502 on the form.
 */
export async function checkBotToken(
  channel: "telegram" | "discord",
  token: string,
): Promise<{ botName: string }> {
  try {
    if (channel === "telegram") {
      const bot = await telegramGetMe(token);
      return { botName: bot.username ? `@${bot.username}` : bot.firstName };
    }
    const app = await discordCurrentApplication(token);
    return { botName: app.name || app.id };
  } catch (error) {
    const app = channel === "telegram" ? "Telegram" : "Discord";
    if (error instanceof CredentialRejected) {
      throw new DomainError(400, `token: ${app} refused this token (${error.message})`);
    }
    if (error instanceof ServiceUnavailable) {
      throw new DomainError(502, `${app} could not check the token: ${error.message}`);
    }
    throw error;
  }
}

/**
 * The last step: the token is checked and stored (sealed) first, so the provisioning worker
 * writes the channel into the new gateway's config; then the agent is provisioned as the
 * agents page would. Answers where the person goes next: the chat, a first message suggested.
 */
export async function finishOnboarding(
  userId: string,
  input: { name: string; model: string; channel: "none" | "telegram" | "discord"; token?: string },
): Promise<string> {
  if (input.channel !== "none" && input.token) {
    await checkBotToken(input.channel, input.token);
    await storeChannelCredential(userId, CHANNEL_OF[input.channel], { token: input.token });
  }
  const agent = await provisionFromPage(userId, { name: input.name, model: input.model });
  return `/agents/${agent.id}/chat?suggest=${encodeURIComponent(FIRST_MESSAGE)}`;
}
