import { randomBytes } from "node:crypto";
import { setUserKey } from "../ai/byok.server.ts";
import { planIds, planRank } from "../billing/catalog.server.ts";
import { activePlanItems } from "../billing/subscriptions.server.ts";
import { discordCurrentApplication } from "../channels/discord.server.ts";
import { CredentialRejected, ServiceUnavailable } from "../channels/http.server.ts";
import { telegramGetMe } from "../channels/telegram.server.ts";
import { toDomainError } from "../openclaw/connections.server.ts";
import { seal, unseal } from "../platform/crypto.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import {
  createLiveStream,
  deleteLiveStream,
  playbackUrlOf,
  RTMP_SERVER,
  requireMuxConfigured,
} from "../streaming/mux.server.ts";
import { type AgentRow, newAgentId } from "./agents.server.ts";
import {
  applyChannels,
  type Channel,
  type ChannelSetting,
  channelSettings,
  storeChannelCredential,
} from "./channels.server.ts";
import { gatewayClientFor } from "./instance-gateway.server.ts";
import {
  addressOf,
  getInstanceByUser,
  type InstanceRow,
  newGatewayToken,
  runtimeNames,
} from "./instances.server.ts";

// POST /api/provision: the user's agent with messaging channels and a live stream. Every
// channel token is checked with its service first, the gateway (when the user already has one)
// must answer, and the stream is created before anything is stored: a failure at any step
// leaves nothing behind (a stream created for a request that then fails is deleted again).
// docs/decisions/0083-channel-provisioning.md

export const AI_PROVIDERS = ["openai", "anthropic", "google", "openrouter"] as const;
export type AiProvider = (typeof AI_PROVIDERS)[number];
export const DEFAULT_AI_PROVIDER: AiProvider = "openai";
export const PROVISION_PLANS = ["free", ...planIds] as const;

/** The model each provider's agents start with (all through the platform's AI endpoint). */
const PROVIDER_MODELS: Record<AiProvider, string> = {
  openai: "openai/gpt-4o-mini",
  anthropic: "anthropic/claude-3-5-haiku-latest",
  google: "google/gemini-2.0-flash",
  openrouter: "openrouter/openai/gpt-4o-mini",
};

export interface ChannelProvisionInput {
  chatapp1Token?: string | undefined;
  chatapp1UserId?: string | undefined;
  chatapp2BotToken?: string | undefined;
  chatapp2GuildId?: string | undefined;
  chatapp2ChannelId?: string | undefined;
  chatapp3Token?: string | undefined;
  chatapp3PhoneNumberId?: string | undefined;
  chatapp3BusinessAccountId?: string | undefined;
  aiProvider?: string | undefined;
  apiKey?: string | undefined;
  plan?: string | undefined;
}

const compact = (o: Record<string, string | undefined>) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v)) as Record<string, string>;

function requestedChannels(input: ChannelProvisionInput): Partial<Record<Channel, ChannelSetting>> {
  const out: Partial<Record<Channel, ChannelSetting>> = {};
  if (input.chatapp1Token) {
    out.chatapp1 = {
      token: input.chatapp1Token,
      details: compact({ userId: input.chatapp1UserId }),
    };
  }
  if (input.chatapp2BotToken) {
    out.chatapp2 = {
      token: input.chatapp2BotToken,
      details: compact({ guildId: input.chatapp2GuildId, channelId: input.chatapp2ChannelId }),
    };
  }
  if (input.chatapp3Token) {
    out.chatapp3 = {
      token: input.chatapp3Token,
      details: compact({
        phoneNumberId: input.chatapp3PhoneNumberId,
        businessAccountId: input.chatapp3BusinessAccountId,
      }),
    };
  }
  return out;
}

/** Checks each token with its channel's API: 400 naming the channel, 502 when it is down. */
async function verifyTokens(channels: Partial<Record<Channel, ChannelSetting>>): Promise<void> {
  const check = async (channel: Channel, field: string, verify: () => Promise<unknown>) => {
    try {
      await verify();
    } catch (error) {
      if (error instanceof CredentialRejected) {
        throw new DomainError(400, `${field} is invalid for ${channel}: ${error.message}`);
      }
      if (error instanceof ServiceUnavailable) {
        throw new DomainError(502, `${channel} could not check the token: ${error.message}`);
      }
      throw error;
    }
  };
  await Promise.all([
    channels.chatapp1 &&
      check("chatapp1", "chatapp1Token", () => telegramGetMe(channels.chatapp1!.token)),
    channels.chatapp2 &&
      check("chatapp2", "chatapp2BotToken", () =>
        discordCurrentApplication(channels.chatapp2!.token),
      ),
    // chatapp3 (WhatsApp Web in OpenClaw) has no token API: the account is linked through the
    // gateway's QR login flow (web.login.start/wait) once the channel is enabled.
  ]);
}

async function requirePlan(userId: string, plan: string): Promise<void> {
  if (plan === "free") return;
  const items = await activePlanItems(userId);
  if (!items.some((item) => planRank(item) >= planRank(plan))) {
    throw new DomainError(402, `The ${plan} plan needs an active subscription: see /pricing`);
  }
}

interface StreamRow {
  provider: string;
  live_stream_id: string;
  playback_id: string;
  stream_key_sealed: string;
  created_at: Date;
}

export async function provisionChannels(userId: string, input: ChannelProvisionInput) {
  const channels = requestedChannels(input);
  if (Object.keys(channels).length === 0) {
    throw new DomainError(
      400,
      "At least one channel token is required: chatapp1Token, chatapp2BotToken or chatapp3Token",
    );
  }
  const aiProvider = (input.aiProvider ?? DEFAULT_AI_PROVIDER) as AiProvider;
  if (!AI_PROVIDERS.includes(aiProvider)) {
    throw new DomainError(400, `aiProvider must be one of: ${AI_PROVIDERS.join(", ")}`);
  }
  const plan = input.plan ?? "free";
  if (!(PROVISION_PLANS as readonly string[]).includes(plan)) {
    throw new DomainError(400, `plan must be one of: ${PROVISION_PLANS.join(", ")}`);
  }
  requireMuxConfigured();
  await requirePlan(userId, plan);
  await verifyTokens(channels);

  // An existing gateway must take the channels; reach it before creating anything.
  const existing = await getInstanceByUser(userId);
  const client = existing?.paired_at ? await gatewayClientFor(existing) : undefined;

  const [stream] = await db()<StreamRow[]>`select * from live_streams where user_id = ${userId}`;
  let created: Awaited<ReturnType<typeof createLiveStream>> | undefined;
  if (!stream) {
    try {
      created = await createLiveStream(userId);
    } catch (error) {
      if (error instanceof ServiceUnavailable) {
        throw new DomainError(502, `Streaming provider unavailable: ${error.message}`);
      }
      throw error;
    }
  }
  const undo = async () => {
    if (created) await deleteLiveStream(created.id).catch(() => {});
  };

  const configured = { ...(await channelSettings(userId)), ...channels };
  let result: { instance: InstanceRow; agent: AgentRow; stream: StreamRow; isNew: boolean };
  try {
    if (client) {
      try {
        await applyChannels(client, configured);
      } catch (error) {
        throw toDomainError(error);
      }
    }
    result = await store(userId, { channels, plan, aiProvider, created, stream });
  } catch (error) {
    await undo();
    throw error;
  }
  if (input.apiKey) await setUserKey(userId, aiProvider, input.apiKey);
  if (result.isNew) {
    // The worker provisions the container and applies the stored channels once it is paired.
    await sendJob("provision-instance", { instanceId: result.instance.id });
  }
  return view(userId, result, aiProvider, configured);
}

/** One transaction: channel credentials, stream record, instance and agent records. */
async function store(
  userId: string,
  p: {
    channels: Partial<Record<Channel, ChannelSetting>>;
    plan: string;
    aiProvider: AiProvider;
    created: Awaited<ReturnType<typeof createLiveStream>> | undefined;
    stream: StreamRow | undefined;
  },
) {
  const model = PROVIDER_MODELS[p.aiProvider];
  return db().begin(async (tx) => {
    await tx`select id from users where id = ${userId} for update`;
    for (const [channel, setting] of Object.entries(p.channels)) {
      await storeChannelCredential(userId, channel as Channel, setting, tx as never);
    }
    let stream = p.stream;
    if (p.created) {
      [stream] = await tx<StreamRow[]>`
        insert into live_streams (user_id, provider, live_stream_id, playback_id, stream_key_sealed)
        values (${userId}, 'mux', ${p.created.id}, ${p.created.playbackId},
                ${seal(p.created.streamKey)})
        returning *`;
    }
    // Same record as ensureInstanceRecord, inside this transaction.
    const id = `ins_${randomBytes(9).toString("base64url").replace(/[-_]/g, "x").toLowerCase()}`;
    const names = runtimeNames(id);
    const [inserted] = await tx<InstanceRow[]>`
      insert into instances (id, user_id, plan, container_name, volume_name, gateway_token_sealed,
        model, desired_state)
      values (${id}, ${userId}, ${p.plan}, ${names.container}, ${names.volume},
        ${seal(newGatewayToken())}, ${model}, 'running')
      on conflict (user_id) do update set plan = excluded.plan, updated_at = now()
      returning *, (xmax = 0) as is_new`;
    const instance = inserted as InstanceRow & { is_new: boolean };
    let [agent] = await tx<AgentRow[]>`
      select * from agents where user_id = ${userId} order by created_at, id limit 1`;
    if (!agent) {
      // The user's first agent: the gateway's `main` agent, within every tier's limit.
      [agent] = await tx<AgentRow[]>`
        insert into agents (id, user_id, name, gateway_agent_id, model, tier)
        values (${newAgentId()}, ${userId}, 'Agent', 'main', ${model}, 'starter')
        returning *`;
    }
    return {
      instance,
      agent: agent as AgentRow,
      stream: stream as StreamRow,
      isNew: instance.is_new,
    };
  }) as Promise<{ instance: InstanceRow; agent: AgentRow; stream: StreamRow; isNew: boolean }>;
}

function view(
  userId: string,
  r: { instance: InstanceRow; agent: AgentRow; stream: StreamRow },
  aiProvider: AiProvider,
  channels: Partial<Record<Channel, ChannelSetting>>,
) {
  const { subdomain, url } = addressOf(r.instance);
  const streamKey = unseal(r.stream.stream_key_sealed);
  const playbackUrl = playbackUrlOf(r.stream.playback_id);
  return {
    success: true,
    userId,
    agentId: r.agent.id,
    id: userId,
    aiProvider,
    aiProviderConfig: {
      model: PROVIDER_MODELS[aiProvider],
      // The gateway's provider is the platform's endpoint; keys stay in the platform.
      baseUrl: `${env().APP_URL.replace(/\/$/, "")}/api/ai/v1`,
      requiresKey: false,
    },
    plan: r.instance.plan,
    streamKey,
    liveStreamId: r.stream.live_stream_id,
    rtmpServer: RTMP_SERVER,
    playbackUrl,
    subdomain,
    url,
    hls: { playlistUrl: playbackUrl },
    rtmp: { server: RTMP_SERVER, key: streamKey },
    status: "active",
    createdAt: r.instance.created_at.toISOString(),
    metadata: {
      channels: {
        chatapp1: Boolean(channels.chatapp1),
        chatapp2: Boolean(channels.chatapp2),
        chatapp3: Boolean(channels.chatapp3),
      },
      streaming: {
        provider: r.stream.provider,
        lowLatency: true,
        resolution: "1080p",
        bitrate: "6000kbps",
      },
    },
  };
}

/** The user's stream for the UI (key included: the owner needs it to go live). */
export async function liveStreamOf(userId: string) {
  const [row] = await db()<StreamRow[]>`select * from live_streams where user_id = ${userId}`;
  if (!row) return undefined;
  const playbackUrl = playbackUrlOf(row.playback_id);
  return {
    liveStreamId: row.live_stream_id,
    rtmpServer: RTMP_SERVER,
    streamKey: unseal(row.stream_key_sealed),
    playbackUrl,
  };
}
