import { setUserKey } from "../ai/byok.server.ts";
import type { ProviderName } from "../ai/providers/shared.server.ts";
import type { GatewayClient } from "../openclaw/client.server.ts";
import { toDomainError } from "../openclaw/connections.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { seal, unseal } from "../platform/crypto.server.ts";
import { db } from "../platform/db.server.ts";
import type { Queryable } from "../platform/db-helpers.server.ts";
import { env } from "../platform/env.server.ts";
import { gatewayClientFor } from "./instance-gateway.server.ts";
import { getInstanceByUser } from "./instances.server.ts";

// Messaging-channel credentials: chatapp1 = Telegram, chatapp2 = Discord, chatapp3 = WhatsApp,
// as OpenClaw names them. Tokens are sealed at rest and written into the gateway's channel
// configuration (a channel token belongs to the agent, unlike AI provider keys, which stay in
// the platform's AI layer). docs/decisions/0081-credentials-and-channels.md

export const CHANNELS = ["chatapp1", "chatapp2", "chatapp3"] as const;
export type Channel = (typeof CHANNELS)[number];
export const GATEWAY_CHANNEL: Record<Channel, string> = {
  chatapp1: "telegram",
  chatapp2: "discord",
  chatapp3: "whatsapp",
};

export const CREDENTIAL_KEYS = [
  "openai",
  "anthropic",
  "google",
  "openrouter",
  "chatapp1",
  "chatapp2",
  "chatapp3",
] as const;
export type CredentialKey = (typeof CREDENTIAL_KEYS)[number];

const isChannel = (key: string): key is Channel => (CHANNELS as readonly string[]).includes(key);

export async function channelCredentialFlags(userId: string): Promise<Record<Channel, boolean>> {
  const rows = await db()<{ channel: Channel }[]>`
    select channel from channel_credentials where user_id = ${userId}`;
  const have = new Set(rows.map((r) => r.channel));
  return Object.fromEntries(CHANNELS.map((c) => [c, have.has(c)])) as Record<Channel, boolean>;
}

export interface ChannelSetting {
  token: string;
  /** Non-secret ids (owner binding, guild, channel, phone number…). */
  details?: Record<string, string>;
}

export async function storeChannelCredential(
  userId: string,
  channel: Channel,
  setting: ChannelSetting,
  sql = db(),
): Promise<void> {
  await sql`insert into channel_credentials (user_id, channel, sealed, details)
    values (${userId}, ${channel}, ${seal(setting.token)}, ${sql.json(setting.details ?? {})})
    on conflict (user_id, channel) do update set sealed = excluded.sealed,
      details = excluded.details, updated_at = now()`;
  await recordAudit({ action: "credentials.set", userId, target: channel }, sql);
}

/** Forgets every channel credential of the user (their gateway is going away). */
export async function deleteChannelCredentials(
  userId: string,
  sql: Queryable = db(),
): Promise<string[]> {
  const rows = await sql<{ channel: string }[]>`
    delete from channel_credentials where user_id = ${userId} returning channel`;
  return rows.map((r) => r.channel);
}

export async function channelSettings(
  userId: string,
): Promise<Partial<Record<Channel, ChannelSetting>>> {
  const rows = await db()<{ channel: Channel; sealed: string; details: Record<string, string> }[]>`
    select channel, sealed, details from channel_credentials where user_id = ${userId}`;
  return Object.fromEntries(
    rows.map((r) => [r.channel, { token: unseal(r.sealed), details: r.details }]),
  );
}

/**
 * The gateway's `channels` config for these settings (OpenClaw's channel docs):
 * - Telegram (built in): the bot token, and the owner as the only allowed sender when given.
 * - Discord (plugin @openclaw/discord): the bot token; guilds are an allowlist (the plugin's
 *   secure default), so a provisioned guild id is the guild it answers in, and a channel id
 *   narrows it to that channel (mention-gated, the plugin's default). DMs stay in pairing mode.
 * - WhatsApp (plugin @openclaw/whatsapp) is WhatsApp Web: no token, the account is linked by the
 *   gateway's QR login (whatsapp-link.server.ts), so only the channel is enabled here.
 */
export function channelsConfig(settings: Partial<Record<Channel, ChannelSetting>>) {
  const config: Record<string, unknown> = {};
  const telegram = settings.chatapp1;
  if (telegram) {
    const owner = telegram.details?.userId;
    // A self-hosted Bot API server (TELEGRAM_API_URL) serves the gateway too, not only the
    // platform's token checks.
    const apiRoot = env().TELEGRAM_API_URL.replace(/\/$/, "");
    config.telegram = {
      enabled: true,
      botToken: telegram.token,
      ...(apiRoot !== "https://api.telegram.org" ? { apiRoot } : {}),
      ...(owner ? { dmPolicy: "allowlist", allowFrom: [owner] } : {}),
    };
  }
  const discord = settings.chatapp2;
  if (discord) {
    const guildId = discord.details?.guildId;
    const channelId = discord.details?.channelId;
    config.discord = {
      enabled: true,
      token: discord.token,
      groupPolicy: "allowlist",
      ...(guildId
        ? {
            guilds: {
              [guildId]: channelId ? { channels: { [channelId]: { enabled: true } } } : {},
            },
          }
        : {}),
    };
  }
  if (settings.chatapp3) config.whatsapp = { enabled: true };
  return config;
}

/** Channels that OpenClaw ships as external plugins (baked into the image, gateway/). */
const PLUGIN_CHANNELS = ["discord", "whatsapp"];

/**
 * `plugins.entries` for every plugin channel: on where the user set the channel up, off
 * elsewhere. Installed and not named, OpenClaw loads such a plugin for its agent tools at a
 * gateway's first turn anyway, and copies it with its dependencies into the state first
 * (WhatsApp: ~80 MB and ~5 CPU-seconds, then ~2 more per turn; decision 0189).
 */
export function channelPluginEntries(
  settings: Partial<Record<Channel, ChannelSetting>>,
): Record<string, { enabled: boolean }> {
  const configured = Object.keys(channelsConfig(settings));
  return Object.fromEntries(
    PLUGIN_CHANNELS.map((id) => [id, { enabled: configured.includes(id) }]),
  );
}

/**
 * The config patch for these channels: `channels`, plus `plugins.entries.<id>.enabled` for the
 * plugin channels among them (OpenClaw wants an external channel plugin enabled explicitly).
 * Empty when there are no channels.
 */
export function channelsPatch(settings: Partial<Record<Channel, ChannelSetting>>) {
  const channels = channelsConfig(settings);
  const plugins = Object.keys(channels).filter((id) => PLUGIN_CHANNELS.includes(id));
  if (Object.keys(channels).length === 0) return {};
  return {
    channels,
    ...(plugins.length > 0
      ? { plugins: { entries: Object.fromEntries(plugins.map((id) => [id, { enabled: true }])) } }
      : {}),
  };
}

/** Writes the channels into a connected gateway's config (hot reload). */
export async function applyChannels(
  client: GatewayClient,
  settings: Partial<Record<Channel, ChannelSetting>>,
): Promise<void> {
  const patch = channelsPatch(settings);
  if (Object.keys(patch).length === 0) return;
  const current = await client.request<{ hash: string }>("config.get");
  // The first Discord or WhatsApp channel hot-loads its plugin before the patch answers: give it
  // time on a busy one-CPU gateway.
  await client.request(
    "config.patch",
    { baseHash: current.hash, raw: JSON.stringify(patch) },
    { timeoutMs: 90_000 },
  );
}

/**
 * set-credential: an AI provider key becomes the user's BYOK key in the AI layer (the gateway
 * keeps calling the platform's endpoint, so no provider key reaches a container); a channel
 * token is applied to the running gateway first and stored (sealed) only once it took it, so a
 * gateway failure (502) leaves nothing half-done.
 */
export async function setCredential(userId: string, key: CredentialKey, value: string) {
  if (!isChannel(key)) {
    await setUserKey(userId, key as ProviderName, value);
    await recordAudit({ action: "credentials.set", userId, target: key });
    return { success: true, key, configured: true };
  }
  const current = await channelSettings(userId);
  // A new token keeps the channel's ids given at provisioning (owner, guild, channel…).
  await saveChannelSetting(userId, key, { token: value, details: current[key]?.details ?? {} });
  return { success: true, key, configured: true };
}

/**
 * A channel's token and ids: applied to the running gateway first and stored (sealed) only once
 * it took them, so a gateway failure (502) leaves nothing half-done.
 */
export async function saveChannelSetting(userId: string, key: Channel, setting: ChannelSetting) {
  const current = await channelSettings(userId);
  const instance = await getInstanceByUser(userId);
  if (instance?.paired_at) {
    try {
      const client = await gatewayClientFor(instance);
      await applyChannels(client, { ...current, [key]: setting });
    } catch (error) {
      throw toDomainError(error);
    }
  }
  await storeChannelCredential(userId, key, setting);
}
