import { z } from "zod";

// An agent's stored configuration: any JSON object the user sends (size-capped), kept verbatim
// as the truth. Only an allow-listed subset of keys ever reaches the gateway's
// agents.entries.<id>: nothing a user writes may touch gateway auth, bind, tools.elevated,
// sandbox, runtimes or workspace paths. docs/decisions/0061-agent-config-allowlist.md

/** Serialized size cap of an agent's configuration. */
export const AGENT_CONFIG_MAX_BYTES = 64 * 1024;

/** Keys of agents.entries.<id> a user's configuration may set (OpenClaw 2026.9.6). */
export const GATEWAY_CONFIG_KEYS = [
  "identity",
  "thinkingDefault",
  "reasoningDefault",
  "fastModeDefault",
  "params",
  "skills",
  "groupChat",
] as const;

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

export const agentConfigSchema = z
  .unknown()
  // abort: zod runs every refinement by default, and the size check needs an object.
  .refine(isPlainObject, { message: "must be a JSON object", abort: true })
  .refine(
    (v) => Buffer.byteLength(JSON.stringify(v) ?? "", "utf8") <= AGENT_CONFIG_MAX_BYTES,
    `must be at most ${AGENT_CONFIG_MAX_BYTES} bytes as JSON`,
  )
  .transform((v) => v as Record<string, unknown>);

/** The part of a stored configuration that is written into the gateway. */
export function gatewayPartOf(config: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of GATEWAY_CONFIG_KEYS) {
    if (config[key] !== undefined && config[key] !== null) out[key] = config[key];
  }
  return out;
}

/** The model id the platform provider serves for an agent's model (`custom`: the default). */
export const CUSTOM_MODEL = "custom";

/** One agents.entries value: name, model on the platform provider, allow-listed keys. */
export function gatewayEntryOf(agent: {
  name: string;
  model: string;
  config: Record<string, unknown>;
}): Record<string, unknown> {
  const entry: Record<string, unknown> = { ...gatewayPartOf(agent.config), name: agent.name };
  // `custom` inherits agents.defaults.model (the instance's model) instead of pinning one.
  if (agent.model !== CUSTOM_MODEL) entry.model = `platform/${agent.model}`;
  return entry;
}
