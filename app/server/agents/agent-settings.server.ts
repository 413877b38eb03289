import type { z } from "zod";
import type { agentSettingsActions } from "../../schemas/agent-settings.ts";
import { DomainError } from "../platform/errors.server.ts";
import { updateAgentConfig } from "./agent-config.server.ts";
import { getOwnedAgent } from "./agents.server.ts";
import { channelSettings, saveChannelSetting } from "./channels.server.ts";
import { attempt } from "./chat-page.server.ts";
import { getHeartbeat, heartbeatUpdateSchema, updateHeartbeat } from "./heartbeat.server.ts";
import { modelOffers } from "./onboarding.server.ts";
import { limitPageAction } from "./pages.server.ts";

// The settings tab (issue 25): what people change, as forms — name, model and persona; who may
// talk to the agent on Telegram; the heartbeat — and the whole configuration as JSON for the
// rest. Each saves through the same services as the API. docs/decisions/0136

type Settings = z.output<typeof agentSettingsActions>;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The persona is OpenClaw's `identity.theme` (allow-listed into the gateway, decision 0061). */
export function personaOf(config: Record<string, unknown>): string {
  const identity = config.identity;
  return isObject(identity) && typeof identity.theme === "string" ? identity.theme : "";
}

export async function settingsPage(userId: string, agentId: string) {
  const agent = await getOwnedAgent(userId, agentId);
  const [models, channels, heartbeat] = await Promise.all([
    modelOffers(),
    channelSettings(userId),
    attempt(() => getHeartbeat(userId)),
  ]);
  return {
    agent: {
      id: agent.id,
      name: agent.name,
      model: agent.model,
      configApplied: agent.applied_revision >= agent.config_revision,
      applyError: agent.apply_error,
    },
    persona: personaOf(agent.config),
    models,
    telegram: channels.chatapp1
      ? { connected: true, owner: channels.chatapp1.details?.userId ?? "" }
      : { connected: false, owner: "" },
    heartbeat: heartbeat.value?.heartbeat ?? null,
    heartbeatError: heartbeat.error ?? null,
    config: agent.config,
  };
}

/** Name, model and persona in one new configuration revision (synced like a config PUT). */
async function saveProfile(
  userId: string,
  agentId: string,
  v: Extract<Settings, { intent: "profile" }>,
) {
  const agent = await getOwnedAgent(userId, agentId);
  const models = await modelOffers();
  if (!models.some((m) => m.id === v.model)) {
    throw new DomainError(400, "model: Choose one of the listed models");
  }
  const identity = isObject(agent.config.identity) ? { ...agent.config.identity } : {};
  if (v.persona) identity.theme = v.persona;
  else delete identity.theme;
  const { identity: _old, ...rest } = agent.config;
  const config = Object.keys(identity).length > 0 ? { ...rest, identity } : rest;
  return updateAgentConfig(userId, agentId, config, { name: v.name, model: v.model });
}

/** Saves one form of the settings tab; answers what the page says next. */
export async function saveSettings(userId: string, agentId: string, value: Settings) {
  await getOwnedAgent(userId, agentId);
  await limitPageAction(userId, "agents");
  switch (value.intent) {
    case "profile": {
      const saved = await saveProfile(userId, agentId, value);
      return saved.applied ? "Saved and applied." : "Saved; the gateway picks it up when it runs.";
    }
    case "config": {
      const saved = await updateAgentConfig(userId, agentId, value.config);
      if ("applyError" in saved && saved.applyError) {
        return `Saved, but the gateway refused it: ${saved.applyError}`;
      }
      return saved.applied ? "Configuration saved and applied." : "Configuration saved.";
    }
    case "access": {
      const current = (await channelSettings(userId)).chatapp1;
      if (!current) throw new DomainError(400, "Connect a Telegram bot first (Channels & keys)");
      const { userId: _owner, ...details } = current.details ?? {};
      await saveChannelSetting(userId, "chatapp1", {
        token: current.token,
        details: value.telegramOwner ? { ...details, userId: value.telegramOwner } : details,
      });
      return value.telegramOwner
        ? `Only Telegram user ${value.telegramOwner} may talk to the agent.`
        : "Anyone who pairs with the bot may talk to the agent.";
    }
    case "heartbeat": {
      const every = value.enabled ? value.every : "0m";
      const update = heartbeatUpdateSchema.safeParse({ every });
      if (!update.success) {
        throw new DomainError(400, `every: ${update.error.issues[0]?.message ?? "invalid"}`);
      }
      await updateHeartbeat(userId, update.data);
      return value.enabled ? `Heartbeat every ${every}.` : "Heartbeat off.";
    }
  }
}
