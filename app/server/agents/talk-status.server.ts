import { userKeyProviders } from "../ai/byok.server.ts";
import { platformVersion } from "../platform/version.server.ts";
import { channelCredentialFlags } from "./channels.server.ts";
import { withGateway } from "./instance-gateway.server.ts";
import type { InstanceRow } from "./instances.server.ts";
import { targetOf } from "./talk-sessions.server.ts";
import { gatewaySkills } from "./talk-skills.server.ts";

// What GET /api/agent says about the agent beside its chat: the gateway's health, which
// credentials are configured, and the API's own description. docs/decisions/0080-agent-interaction.md

/** Version of the agent-interaction API (contract: a semantic version string). */
export const API_VERSION = "1.0.0";

interface GatewayHealth {
  ok?: boolean;
  channelOrder?: string[];
  channels?: Record<string, unknown>;
}

const CHANNEL_NAMES: Record<string, string> = {
  telegram: "chatapp1",
  discord: "chatapp2",
  whatsapp: "chatapp3",
};

export async function health(userId: string) {
  const target = await targetOf(userId);
  return withGateway(userId, async (client, instance: InstanceRow) => {
    const [h, status, skills] = await Promise.all([
      client.request<GatewayHealth>("health"),
      client.request<{ runtimeVersion?: string; sessions?: { defaults?: { model?: string } } }>(
        "status",
      ),
      gatewaySkills(client, target),
    ]);
    const channels = (h.channelOrder ?? Object.keys(h.channels ?? {})).map(
      (c) => CHANNEL_NAMES[c] ?? c,
    );
    const started = instance.started_at?.getTime();
    return {
      status: h.ok ? "healthy" : "degraded",
      version: status.runtimeVersion ?? client.hello?.server.version ?? instance.gateway_version,
      apiVersion: API_VERSION,
      uptime: started ? Math.max(0, Math.floor((Date.now() - started) / 1000)) : 0,
      model: status.sessions?.defaults?.model ?? target.agent?.model ?? instance.model,
      channels,
      skills: skills.filter((s) => !s.disabled && s.eligible).map((s) => s.skillKey),
      lastSeen: Date.now(),
    };
  });
}

export const PROVIDER_CREDENTIALS = ["openai", "anthropic", "google", "openrouter"] as const;

/** The credential map: true for each provider key and channel token the user configured. */
export async function credentials(userId: string) {
  const [keys, channels] = await Promise.all([
    userKeyProviders(userId),
    channelCredentialFlags(userId),
  ]);
  const have = new Set<string>(keys.map((k) => k.provider));
  return {
    credentials: {
      ...Object.fromEntries(PROVIDER_CREDENTIALS.map((p) => [p, have.has(p)])),
      ...channels,
    } as Record<string, boolean>,
  };
}

/** GET /api/agent without an action: versions and what each action does. */
export function describeApi() {
  return {
    apiVersion: API_VERSION,
    platformVersion,
    endpoints: {
      "GET /api/agent?action=health": "Health of your agent's gateway: version, uptime, model",
      "GET /api/agent?action=sessions": "Your agent's chat sessions",
      "GET /api/agent?action=session&sessionId=…": "One session with its messages",
      "GET /api/agent?action=memory": "The last 10 messages of the active session (truncated)",
      "GET /api/agent?action=skills": "Skills available on your instance",
      "GET /api/agent?action=credentials": "Which credentials are configured (never the values)",
      "POST /api/agent {action: 'chat', message, sessionId?}": "Send a message, get the reply",
      "POST /api/agent {action: 'create-session'}": "Start a new session",
      "POST /api/agent {action: 'update-skill', skillId, enabled}": "Turn a skill on or off",
      "POST /api/agent {action: 'set-credential', key, value}":
        "Configure a provider key or channel token",
      "GET /api/agent/whatsapp": "The WhatsApp channel's state (configured, linked, connected)",
      "POST /api/agent/whatsapp {action: 'start' | 'wait'}":
        "Link WhatsApp: a QR to scan (start), then wait for the scan",
      "GET /api/memory?agentId=…": "An agent's long-term memory (MEMORY.md; default: your first)",
      "POST /api/memory {content, mode?: 'append' | 'replace', agentId?}":
        "Store memory: append an entry (default) or replace it",
      "GET /api/heartbeat": "Heartbeat settings: how often your agents wake up on their own",
      "POST /api/heartbeat {enabled?, every?, prompt?, activeHours?, target?, …}":
        "Change heartbeat settings (null resets one)",
      "DELETE /api/heartbeat": "Reset heartbeat settings to OpenClaw's defaults",
    },
  };
}
