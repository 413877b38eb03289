import { Counter } from "prom-client";
import { FastCounter, FastHistogram } from "../platform/metrics/fast.server.ts";
import { metricsEnabled, PREFIX, registry } from "../platform/metrics/registry.server.ts";

// The AI layer's Prometheus metrics (docs/decisions/0202): by provider and model family only —
// never the user, the agent or the exact model id a local server may name freely. Recorded
// only while metrics are on (METRICS_TOKEN set).

const LATENCY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120];

const calls = new FastCounter({
  name: `${PREFIX}ai_calls_total`,
  help: "AI calls metered, by provider, model family and outcome (ok, error, client_error)",
  labelNames: ["provider", "model_family", "outcome"] as const,
  registers: [registry],
});
const callSeconds = new FastHistogram({
  name: `${PREFIX}ai_call_duration_seconds`,
  help: "AI calls from arrival to the last byte of the answer (a stream: its end)",
  labelNames: ["provider", "model_family"] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});
const firstToken = new FastHistogram({
  name: `${PREFIX}ai_time_to_first_token_seconds`,
  help: "Streamed AI calls from arrival to the provider's first streamed chunk",
  labelNames: ["provider", "model_family"] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});
const overhead = new FastHistogram({
  name: `${PREFIX}ai_overhead_seconds`,
  help: "What the platform's AI hop adds to a call: its time less the time spent on providers",
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
  registers: [registry],
});
const tokens = new FastCounter({
  name: `${PREFIX}ai_tokens_total`,
  help: "Tokens of metered AI calls, by provider, model family and kind (prompt, completion)",
  labelNames: ["provider", "model_family", "kind"] as const,
  registers: [registry],
});
const charged = new FastCounter({
  name: `${PREFIX}ai_charged_micro_usd_total`,
  help: "Micro-USD charged for AI calls (what users' credits paid; BYOK calls are 0)",
  labelNames: ["provider", "model_family"] as const,
  registers: [registry],
});
const held = new FastCounter({
  name: `${PREFIX}ai_held_micro_usd_total`,
  help: "Micro-USD held from credits for AI calls before they ran (settled to the charge after)",
  registers: [registry],
});
const overheadAll = overhead.child({});
const heldAll = held.child({});
const overBound = new Counter({
  name: `${PREFIX}ai_over_bound_micro_usd_total`,
  help: "Micro-USD providers reported beyond an AI call's bound: never charged, counted as uncollected",
  labelNames: ["provider", "model_family"] as const,
  registers: [registry],
});
const refusals = new Counter({
  name: `${PREFIX}ai_refusals_total`,
  help: "AI calls refused with 402, by reason (credits, daily_limit)",
  labelNames: ["reason"] as const,
  registers: [registry],
});
const providerErrors = new Counter({
  name: `${PREFIX}ai_provider_errors_total`,
  help: "Failed attempts at an AI provider (before any fallback), by provider and whether transient",
  labelNames: ["provider", "transient"] as const,
  registers: [registry],
});

// Families named by the vendors' own model lines; anything else (a local server's names) is
// `other`, so the label's values stay a short, fixed list.
const FAMILIES: Array<[RegExp, string]> = [
  [/^gpt-(\d(?:\.\d)?)(o)?(?:-(mini|nano))?/, "gpt"],
  [/^(o\d)(?:-(mini|pro))?(?![\w.])/, "o"],
  [/^claude-(?:[\d.-]+-)?(opus|sonnet|haiku)/, "claude"],
  [/^claude-(opus|sonnet|haiku)/, "claude"],
  [/^gemini-([\d.]+)-(pro|flash)/, "gemini"],
  [/^(llama|mistral|mixtral|qwen|deepseek|gemma|phi|grok|command)/, "open"],
];

const familyCache = new Map<string, string>();

/** `openai/gpt-4o-mini-2024-07-18` → `gpt-4o-mini`; unknown names → `other`. */
export function modelFamily(model: string): string {
  let family = familyCache.get(model);
  if (family !== undefined) return family;
  family = "other";
  const name = model.slice(model.lastIndexOf("/") + 1).toLowerCase();
  for (const [pattern, kind] of FAMILIES) {
    const m = pattern.exec(name);
    if (!m) continue;
    if (kind === "gpt") family = `gpt-${m[1]}${m[2] ?? ""}${m[3] ? `-${m[3]}` : ""}`;
    else if (kind === "o") family = m[2] ? `${m[1]}-${m[2]}` : m[1]!;
    else if (kind === "claude") family = `claude-${m[1]}`;
    else if (kind === "gemini") family = `gemini-${m[1]}-${m[2]}`;
    else family = m[1]!;
    break;
  }
  // Bounded either way: at most one entry per distinct model the catalog serves.
  if (familyCache.size < 10_000) familyCache.set(model, family);
  return family;
}

export interface MeteredCall {
  provider: string | null;
  model: string;
  status: "ok" | "error" | "client_error";
  latencyMs: number;
  promptTokens: number;
  completionTokens: number;
  costMicroUsd: number;
}

interface CallChildren {
  ok: { inc(): void };
  error: { inc(): void };
  client_error: { inc(): void };
  seconds: { observe(value: number): void };
  firstToken: { observe(value: number): void };
  prompt: { inc(value: number): void };
  completion: { inc(value: number): void };
  charged: { inc(value: number): void };
}

// The metric children of each (provider, model) pair, made at its first call: a call records
// without building label objects or hashing them again.
const children = new Map<string, Map<string, CallChildren>>();

function childrenOf(provider: string, model: string): CallChildren {
  let byModel = children.get(provider);
  if (!byModel) {
    byModel = new Map();
    children.set(provider, byModel);
  }
  let found = byModel.get(model);
  if (!found) {
    const model_family = modelFamily(model);
    const labels = { provider, model_family };
    found = {
      ok: calls.child({ ...labels, outcome: "ok" }),
      error: calls.child({ ...labels, outcome: "error" }),
      client_error: calls.child({ ...labels, outcome: "client_error" }),
      seconds: callSeconds.child(labels),
      firstToken: firstToken.child(labels),
      prompt: tokens.child({ ...labels, kind: "prompt" }),
      completion: tokens.child({ ...labels, kind: "completion" }),
      charged: charged.child(labels),
    };
    // Bounded by the catalog's models; a model id seen once more than that is not cached.
    if (byModel.size < 1000) byModel.set(model, found);
  }
  return found;
}

/** One metered call (metering.server.ts calls this for every call it records). */
export function recordAiCall(call: MeteredCall): void {
  if (!metricsEnabled()) return;
  const c = childrenOf(call.provider ?? "none", call.model);
  c[call.status].inc();
  if (call.status === "client_error") return;
  c.seconds.observe(call.latencyMs / 1000);
  if (call.promptTokens > 0) c.prompt.inc(call.promptTokens);
  if (call.completionTokens > 0) c.completion.inc(call.completionTokens);
  if (call.costMicroUsd > 0) c.charged.inc(call.costMicroUsd);
}

export function recordFirstToken(provider: string, model: string, ms: number): void {
  if (!metricsEnabled()) return;
  childrenOf(provider, model).firstToken.observe(ms / 1000);
}

export function recordAiOverhead(ms: number): void {
  if (!metricsEnabled()) return;
  overheadAll.observe(Math.max(0, ms) / 1000);
}

export function recordHeld(microUsd: number): void {
  if (!metricsEnabled()) return;
  if (microUsd > 0) heldAll.inc(microUsd);
}

/** What a provider reported beyond a call's bound (decision 0206): the part never charged. */
export function recordOverBound(provider: string, model: string, microUsd: number): void {
  if (!metricsEnabled() || microUsd <= 0) return;
  overBound.inc({ provider, model_family: modelFamily(model) }, microUsd);
}

export function recordRefusal(reason: "credits" | "daily_limit"): void {
  if (!metricsEnabled()) return;
  refusals.inc({ reason });
}

export function recordProviderError(provider: string, transient: boolean): void {
  if (!metricsEnabled()) return;
  providerErrors.inc({ provider, transient: transient ? "true" : "false" });
}
