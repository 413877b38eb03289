import { resetCatalogCache } from "../../app/server/ai/catalog.server.ts";
import { resetCooldowns } from "../../app/server/ai/cooldown.server.ts";
import { resetAiHealthCache } from "../../app/server/ai/health.server.ts";
import {
  issueInstanceToken,
  resetInstanceTokenCache,
} from "../../app/server/ai/instance-tokens.server.ts";
import type { UsageRecord } from "../../app/server/ai/metering.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { ensureUser } from "../helpers/users.ts";
import type { createOpenAiFake } from "../msw/handlers/openai.ts";

// Shared set-up of the AI-layer tests: which providers are configured, and a clean slate.

const AI_VARS = [
  "OPENAI_API_KEY",
  "OPENAI_BASE_URL",
  "ANTHROPIC_API_KEY",
  "ANTHROPIC_BASE_URL",
  "GOOGLE_API_KEY",
  "GOOGLE_BASE_URL",
  "OPENROUTER_API_KEY",
  "OPENROUTER_BASE_URL",
  "AI_TIMEOUT_MS",
  "AI_RETRIES",
  "AI_COOLDOWN_FAILURES",
  "AI_COOLDOWN_SECONDS",
  "AI_DAILY_LIMIT_USD",
];

/** Replaces the AI configuration with `vars` (retries without delay) and forgets every cache. */
export async function configureAi(vars: Record<string, string>, { clearDb = true } = {}) {
  for (const name of AI_VARS) delete process.env[name];
  Object.assign(process.env, { AI_RETRY_DELAY_MS: "0" }, vars);
  resetEnvCache();
  resetCatalogCache();
  resetCooldowns();
  resetAiHealthCache();
  resetInstanceTokenCache();
  if (clearDb) {
    await db()`delete from ai_models`;
    await db()`delete from ai_catalog_refreshes`;
  }
}

export const allProviders = {
  OPENAI_API_KEY: "test-key",
  ANTHROPIC_API_KEY: "test-key",
  GOOGLE_API_KEY: "test-key",
  OPENROUTER_API_KEY: "test-key",
};

export async function giveCredits(userId: string, microUsd: number, id = `led_${userId}_grant`) {
  await ensureUser(userId);
  await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference)
    values (${id}, ${userId}, ${microUsd}, 'test grant', ${id})`;
}

export async function balanceOf(userId: string): Promise<number> {
  const [row] = await db()<{ b: number }[]>`select coalesce(sum(amount_micro_usd), 0)::bigint as b
    from credit_ledger where user_id = ${userId}`;
  return row?.b ?? 0;
}

let leaseSeq = 0;

/**
 * The credit-lease tests' slate: the OpenAI fake answering 100 micro-USD per call (gpt-4o),
 * 0.01 USD leases, and a new user with a model-endpoint token of a new instance.
 */
export async function leaseTestUser(openai: ReturnType<typeof createOpenAiFake>, prefix: string) {
  openai.state.calls = [];
  openai.state.failures = [];
  openai.state.usage = { prompt: 12, completion: 7 };
  await configureAi({ OPENAI_API_KEY: "test-key", AI_CREDIT_LEASE_USD: "0.01" });
  leaseSeq += 1;
  const userId = `usr_${prefix}_${leaseSeq}`;
  const instanceId = `ins_${prefix}_${leaseSeq}`;
  return { userId, instanceId, token: await issueInstanceToken(userId, instanceId) };
}

/** One metered call of `costMicroUsd` on platform credits, as the completions path records it. */
export const usageRecord = (
  userId: string,
  costMicroUsd: number,
  endpoint: UsageRecord["endpoint"] = "agents",
): UsageRecord => ({
  userId,
  instanceId: null,
  endpoint,
  provider: "openai",
  model: "openai/gpt-4o",
  promptTokens: 1,
  completionTokens: 1,
  tokensEstimated: false,
  costMicroUsd,
  billingMode: "credits",
  stream: false,
  latencyMs: 1,
  status: "ok",
  httpStatus: 200,
  error: null,
});
