import {
  channelPluginEntries,
  channelSettings,
  channelsPatch,
} from "../../app/server/agents/channels.server.ts";
import { INGRESS_ORIGIN } from "../../app/server/agents/control-ui-device.server.ts";
import { PLATFORM_HEARTBEAT } from "../../app/server/agents/heartbeat.server.ts";
import { type InstanceRow, updateInstance } from "../../app/server/agents/instances.server.ts";
import {
  issueInstanceToken,
  revokeInstanceToken,
  revokeInstanceTokens,
} from "../../app/server/ai/instance-tokens.server.ts";
import type { GatewayClient } from "../../app/server/openclaw/client.server.ts";
import { env } from "../../app/server/platform/env.server.ts";
import { queueAgentSync } from "./agents-sync.ts";
import {
  CONFIG_PATH,
  ensureNetwork,
  GATEWAY_PORT,
  instanceImage,
  ownerLabels,
  rt,
  STATE_DIR,
} from "./engine.ts";
import { connectPaired } from "./pairing.ts";

// The platform's part of a gateway's config: written into an empty volume before the first
// start, patched over the control protocol afterwards (hot reload).

/**
 * The version of what `gatewayConfig` gives a gateway. Bump it when a change must reach the
 * gateways that exist: reconcile re-applies the platform's part to every running gateway of an
 * older version (once; one config reload each). 1: before the Control UI; 2: with it; 3: the
 * Control UI served from the image in place (decision 0187); 4: the channel plugins of channels
 * the user has not set up turned off (decision 0189); 5: each agent names itself in its model
 * calls (its entry's `params.extra_body`, decision 0225: reapplyConfig queues an agents sync).
 */
export const PLATFORM_CONFIG_VERSION = 5;

/** Records that the instance's gateway has the platform's current config part. */
async function recordConfigVersion(instanceId: string): Promise<void> {
  await updateInstance(instanceId, { platform_config_version: PLATFORM_CONFIG_VERSION });
}

/** The platform's AI endpoint as a container sees it (the network's gateway IP by default). */
export async function platformAiBaseUrl(gatewayIp: string | undefined): Promise<string> {
  const { RUNTIME_PLATFORM_AI_URL, PORT } = env();
  if (RUNTIME_PLATFORM_AI_URL) return RUNTIME_PLATFORM_AI_URL.replace(/\/$/, "");
  return `http://${gatewayIp ?? "127.0.0.1"}:${PORT}/api/ai/v1`;
}

/**
 * The gateway's config: token auth, device auth on, no extra origins, the platform as provider.
 * `initial`: the config a new gateway starts from, which also carries the platform's defaults of
 * settings users own afterwards (the heartbeat); later patches leave those alone.
 */
export function gatewayConfig(options: {
  aiBaseUrl: string;
  aiToken: string;
  model: string;
  initial?: boolean;
  /** The image's own Control UI folder (AgentRuntime.controlUiRoot), when it names one. */
  controlUiRoot?: string;
}) {
  const [vendor, ...rest] = options.model.split("/");
  const modelId = rest.length ? options.model : `${vendor}`;
  return {
    gateway: {
      mode: "local",
      bind: "lan",
      port: GATEWAY_PORT,
      auth: { mode: "token" },
      http: { endpoints: { chatCompletions: { enabled: true } } },
      // OpenClaw's own Control UI, reached only through the platform's ingress, which is the
      // device the gateway sees for the owner's browser (decision 0170).
      // Served from the image's read-only copy: otherwise OpenClaw copies and hashes its 55 MB
      // into every gateway's state at each fresh start (decision 0187).
      controlUi: {
        enabled: true,
        allowedOrigins: [INGRESS_ORIGIN],
        ...(options.controlUiRoot ? { root: options.controlUiRoot } : {}),
      },
      // No host PTY over the control protocol: the platform never opens one, so nobody can.
      terminal: { enabled: false },
    },
    agents: {
      defaults: {
        skipBootstrap: true,
        model: { primary: `platform/${modelId}` },
        ...(options.initial ? { heartbeat: { ...PLATFORM_HEARTBEAT } } : {}),
      },
    },
    // Each chat-channel sender gets their own session (OpenClaw's default shares one "main"
    // session across every DM): people do not see each other's context, and the platform can
    // tell a conversation's channel from its session key (agent:<id>:telegram:direct:<peer>).
    session: { dmScope: "per-channel-peer" },
    // Skill folders arrive as archives the platform checked (app/server/skills, decision 0111).
    skills: { install: { allowUploadedArchives: true } },
    // No channel set up yet: its plugin stays unloaded (applyChannels turns it on).
    plugins: { entries: channelPluginEntries({}) },
    models: {
      mode: "merge",
      providers: {
        platform: {
          baseUrl: options.aiBaseUrl,
          apiKey: options.aiToken,
          api: "openai-completions",
          models: [{ id: modelId, name: modelId }],
        },
      },
    },
  };
}

/**
 * Writes `config` as the gateway's config file into `volume` unless one is there already.
 * `instanceId` labels the one-shot containers with their owner (pooled gateways have none).
 */
export async function writeConfigIfAbsent(
  volume: string,
  image: string,
  config: () => Promise<unknown>,
  instanceId?: string,
): Promise<boolean> {
  const labels = ownerLabels(instanceId);
  const exists = await rt().runOnce({
    image,
    volume,
    volumeTarget: STATE_DIR,
    entrypoint: ["sh", "-c"],
    cmd: [`test -s ${CONFIG_PATH}`],
    labels,
  });
  if (exists.exitCode === 0) return false;
  // The config travels base64-encoded in the one-shot container's environment; that
  // container is removed at once. umask 077: the file is the gateway user's only.
  const written = await rt().runOnce({
    image,
    volume,
    volumeTarget: STATE_DIR,
    entrypoint: ["sh", "-c"],
    cmd: [
      `umask 077 && echo "$CONFIG_B64" | base64 -d > ${CONFIG_PATH}.tmp && mv ${CONFIG_PATH}.tmp ${CONFIG_PATH}`,
    ],
    env: { CONFIG_B64: Buffer.from(JSON.stringify(await config())).toString("base64") },
    labels,
  });
  if (written.exitCode !== 0) {
    throw new Error(`writing the gateway config failed: ${written.stderr.slice(0, 500)}`);
  }
  return true;
}

/** An instance's first config, with a fresh model-endpoint token (any earlier one revoked). */
export async function writeInitialConfig(
  row: InstanceRow,
  image: string,
  gatewayIp: string | undefined,
) {
  // Only on an empty volume: an existing config (and the token inside it) is kept; later changes
  // go through config.patch.
  const written = await writeConfigIfAbsent(
    row.volume_name,
    image,
    async () => {
      await revokeInstanceTokens(row.id);
      return gatewayConfig({
        aiBaseUrl: await platformAiBaseUrl(gatewayIp),
        aiToken: await issueInstanceToken(row.user_id, row.id),
        model: row.model ?? env().RUNTIME_DEFAULT_MODEL,
        initial: true,
        controlUiRoot: await rt().controlUiRoot(image),
      });
    },
    row.id,
  );
  if (written) await recordConfigVersion(row.id);
}

/** Merges `config` into the gateway's config (hot reload; the base hash guards a race). */
export async function patchConfig(
  client: GatewayClient,
  config: Record<string, unknown>,
): Promise<void> {
  const current = await client.request<{ hash: string }>("config.get");
  await client.request(
    "config.patch",
    { baseHash: current.hash, raw: JSON.stringify(config) },
    { timeoutMs: 30_000 },
  );
}

/**
 * Patches the platform's part of a gateway's config over a paired connection: the gateway
 * settings, the platform AI endpoint with a fresh model-endpoint token (older ones revoked), and
 * the instance's model.
 */
export async function applyPlatformConfig(
  client: GatewayClient,
  row: Pick<InstanceRow, "id" | "user_id" | "model"> &
    Partial<Pick<InstanceRow, "image" | "image_id">>,
): Promise<void> {
  // The network's gateway IP only when no endpoint URL is configured (it names the endpoint).
  const gatewayIp = env().RUNTIME_PLATFORM_AI_URL ? undefined : (await ensureNetwork()).gatewayIp;
  const token = await issueInstanceToken(row.user_id, row.id);
  const channels = await channelSettings(row.user_id);
  const config = {
    ...gatewayConfig({
      aiBaseUrl: await platformAiBaseUrl(gatewayIp),
      aiToken: token,
      model: row.model ?? env().RUNTIME_DEFAULT_MODEL,
      controlUiRoot: await rt().controlUiRoot(instanceImage(row)),
    }),
    // The user's messaging channels, and their plugins on (the others off), survive repair
    // and pool adoption.
    ...channelsPatch(channels),
    plugins: { entries: channelPluginEntries(channels) },
  };
  try {
    await patchConfig(client, config);
  } catch (error) {
    // Not applied: the gateway keeps the token it has (still valid); the new one goes.
    await revokeInstanceToken(token);
    throw error;
  }
  // Applied: the older tokens go (the gateway now calls with the new one).
  await revokeInstanceTokens(row.id, token);
  await recordConfigVersion(row.id);
}

/**
 * Re-applies the platform's part of the config (repair, reset, reconcile of an older version),
 * and queues the agents' sync: their entries are the platform's too (version 5: each names its
 * agent in its model calls, decision 0225).
 */
export async function reapplyConfig(row: InstanceRow, address: string): Promise<void> {
  const { client } = await connectPaired(row, address);
  try {
    await applyPlatformConfig(client, row);
  } finally {
    client.close();
  }
  await queueAgentSync(row.id);
}
