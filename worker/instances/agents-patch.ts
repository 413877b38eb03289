import { CUSTOM_MODEL } from "../../app/schemas/agents.ts";
import {
  GATEWAY_CONFIG_KEYS,
  gatewayEntryOf,
} from "../../app/server/agents/agent-config.server.ts";
import { type AgentRow, FIRST_GATEWAY_AGENT_ID } from "../../app/server/agents/agents.server.ts";
import type { InstanceRow } from "../../app/server/agents/instances.server.ts";
import { AGENT_HINT_FIELD } from "../../app/server/ai/agent-hint.server.ts";
import { env } from "../../app/server/platform/env.server.ts";

// The config.patch that writes a user's agents into their gateway (agents-sync.ts), computed
// from the platform's rows alone, so applying it again changes nothing.

export interface GatewayConfigSnapshot {
  hash: string;
  config?: {
    agents?: { entries?: Record<string, unknown>; ownership?: string };
    models?: { providers?: { platform?: { models?: Array<{ id: string }> } } };
  };
}

/** Gateway agent ids the platform created (`main`, `agt-…`); others are left alone. */
const isPlatformAgentId = (id: string) => id === FIRST_GATEWAY_AGENT_ID || id.startsWith("agt-");

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The merge patch (RFC 7386, what config.patch applies) turning `current` into `desired`:
 * keys that are gone become null, nested objects are diffed, anything else is replaced.
 */
export function mergeDiff(current: unknown, desired: unknown): unknown {
  if (!isObject(current) || !isObject(desired)) return desired;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(desired)) out[k] = mergeDiff(current[k], v);
  for (const k of Object.keys(current)) if (!(k in desired)) out[k] = null;
  return out;
}

/** Keys of an entry the platform owns (the gateway adds its own, e.g. workspace). */
const OWNED_KEYS = new Set<string>(["name", "model", ...GATEWAY_CONFIG_KEYS]);

/** Arrays the patch replaces (config.patch refuses destructive array changes elsewhere). */
export const REPLACE_PATHS = [
  "models.providers.platform.models",
  "agents.entries.*.skills",
  "agents.entries.*.groupChat.mentionPatterns",
];

/**
 * The agent's entry naming the agent in each of its model calls: OpenClaw merges the agent's
 * `params.extra_body` into every OpenAI-compatible request body it sends for the agent (chat,
 * channel messages, heartbeats), and the platform's endpoint takes the field out again and
 * attributes the call (decision 0225). The owner's own `extra_body` keys are kept.
 */
export function withAgentHint(entry: Record<string, unknown>, agentId: string) {
  const params = isObject(entry.params) ? entry.params : {};
  const extra = isObject(params.extra_body) ? params.extra_body : {};
  return { ...entry, params: { ...params, extra_body: { ...extra, [AGENT_HINT_FIELD]: agentId } } };
}

/** The config.patch that makes the gateway's agents exactly the user's agents. */
export function agentsPatch(
  agents: AgentRow[],
  instance: Pick<InstanceRow, "model">,
  current: GatewayConfigSnapshot["config"],
) {
  const entries: Record<string, unknown> = {};
  for (const agent of agents) {
    const existing = current?.agents?.entries?.[agent.gateway_agent_id];
    const owned = Object.fromEntries(
      Object.entries(isObject(existing) ? existing : {}).filter(([k]) => OWNED_KEYS.has(k)),
    );
    // A key removed from the stored configuration is removed from the gateway too.
    entries[agent.gateway_agent_id] = mergeDiff(
      owned,
      withAgentHint(gatewayEntryOf(agent), agent.id),
    );
  }
  // A deleted agent's entry goes (merge-patch null); entries not made by us are kept.
  for (const id of Object.keys(current?.agents?.entries ?? {})) {
    if (!(id in entries) && isPlatformAgentId(id) && id !== FIRST_GATEWAY_AGENT_ID) {
      entries[id] = null;
    }
  }
  // Every agent's model must be one the platform provider declares.
  const declared = new Set((current?.models?.providers?.platform?.models ?? []).map((m) => m.id));
  const wanted = [
    instance.model ?? env().RUNTIME_DEFAULT_MODEL,
    ...agents.map((a) => a.model).filter((m) => m !== CUSTOM_MODEL),
  ];
  const models = [...new Set([...declared, ...wanted])].map((id) => ({ id, name: id }));
  return {
    agents: {
      entries,
      // Several agents in one gateway are an explicit fleet: no implicit default owner.
      ...(agents.length > 1 ? { ownership: "explicit" as const } : {}),
    },
    models: { providers: { platform: { models } } },
  };
}
