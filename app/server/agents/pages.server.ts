import { z } from "zod";
import { CUSTOM_MODEL, LOG_LEVELS } from "../../schemas/agents.ts";
import { frontendModels } from "../ai/models.server.ts";
import { planRank } from "../billing/catalog.server.ts";
import { activePlanItems, hasActiveSubscription } from "../billing/subscriptions.server.ts";
import { getAgentVerification } from "../identity/verification.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import {
  agentStatus,
  agentSummaries,
  createAgentRecord,
  getOwnedAgent,
  TIER_LIMITS,
  TIERS,
  type Tier,
  tierOfUser,
} from "./agents.server.ts";
import {
  contractStatus,
  getInstanceByUser,
  instanceStatsView,
  provisionInstance,
  restartInstance,
  startInstance,
  stopInstance,
  subdomainOf,
  updateInstanceImage,
} from "./instances.server.ts";
import { listMessages } from "./messages.server.ts";

// What the dashboard pages (app/routes/agents*.tsx) need from the agents service, in one place:
// every function takes the signed-in user's id and only ever reads that user's rows.

/** The provision form's model options: the catalog's ids (first = default), then `custom`. */
export async function modelChoices(): Promise<{ models: Array<{ id: string; name: string }> }> {
  let models: Array<{ id: string; name: string }> = [];
  try {
    models = (await frontendModels()).map((m) => ({ id: m.id, name: m.name }));
  } catch {
    // The catalog is down: `custom` (the instance's default model) still provisions.
  }
  return { models: [...models, { id: CUSTOM_MODEL, name: "Custom (the platform's default)" }] };
}

/** The list page: agents with live status, and what the provision form may offer. */
export async function agentsOverview(userId: string) {
  const [agents, subscribed, tier, choices] = await Promise.all([
    agentSummaries(userId),
    hasActiveSubscription(userId),
    tierOfUser(userId),
    modelChoices(),
  ]);
  const tiers = tier ? TIERS.slice(0, TIERS.indexOf(tier) + 1) : [];
  return {
    agents,
    subscribed,
    tier: tier ?? null,
    tiers: tiers.map((t) => ({ id: t, limit: TIER_LIMITS[t] })),
    limit: tier ? TIER_LIMITS[tier] : 0,
    models: choices.models,
  };
}

/** Statuses only (the list's live refresh asks for these every few seconds). */
export async function agentStatuses(userId: string) {
  const agents = await agentSummaries(userId);
  return agents.map((a) => ({ id: a.id, status: a.status }));
}

/**
 * Provisions from the dashboard: the agent record under the tier limit (402/429 as the API),
 * then the user's instance when it has none yet (the first agent runs in it).
 */
export async function provisionFromPage(
  userId: string,
  input: { name: string; model: string; tier?: Tier | undefined },
) {
  const plans = await activePlanItems(userId);
  const agent = await createAgentRecord(userId, {
    name: input.name,
    model: input.model,
    ...(input.tier ? { tier: input.tier } : {}),
  });
  const instance = await getInstanceByUser(userId);
  if (!instance) {
    const plan = [...plans].sort((a, b) => planRank(b) - planRank(a))[0];
    // `custom` leaves the instance on the runtime's default model.
    const model = input.model === CUSTOM_MODEL ? undefined : input.model;
    await provisionInstance(userId, { ...(model ? { model } : {}), ...(plan ? { plan } : {}) });
  }
  return agent;
}

export const LIFECYCLE_INTENTS = ["start", "stop", "restart", "update"] as const;
export type LifecycleIntent = (typeof LIFECYCLE_INTENTS)[number];

/** A lifecycle button: the agent must be the user's (404), then its instance is acted on. */
export async function agentLifecycle(userId: string, agentId: string, intent: LifecycleIntent) {
  await getOwnedAgent(userId, agentId);
  switch (intent) {
    case "start":
      return startInstance(userId);
    case "stop":
      return stopInstance(userId);
    case "restart":
      return restartInstance(userId);
    case "update":
      return updateInstanceImage(userId);
  }
}

/** Query parameters of the agent page: messages paging and the log level filter. */
export const agentPageQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).catch(50),
  offset: z.coerce.number().int().min(0).catch(0),
  level: z.enum(LOG_LEVELS).optional().catch(undefined),
});

/** The agent page: detail, live stats, verification, messages (one page) and configuration. */
export async function agentPage(
  userId: string,
  agentId: string,
  query: { limit: number; offset: number },
) {
  const row = await getOwnedAgent(userId, agentId);
  const [instance, verification, messages] = await Promise.all([
    getInstanceByUser(userId),
    getAgentVerification(row.id),
    listMessages(row.id, query),
  ]);
  const subdomain = instance ? subdomainOf(instance) : null;
  return {
    agent: {
      id: row.id,
      name: row.name,
      model: row.model,
      tier: row.tier,
      status: agentStatus(instance),
      createdAt: row.created_at.toISOString(),
      startedAt: instance?.started_at?.toISOString() ?? null,
      plan: instance?.plan ?? null,
      subdomain,
      url: subdomain ? `https://${subdomain}` : null,
      gatewayVersion: instance?.gateway_version ?? "unknown",
      lastError: instance && contractStatus(instance) === "error" ? instance.last_error : null,
      configApplied: row.applied_revision >= row.config_revision,
      applyError: row.apply_error,
    },
    stats: instance ? agentStats(row.id, instance) : null,
    verification,
    messages: { ...messages, limit: query.limit, offset: query.offset },
    config: row.config,
  };
}

/** Live container figures from the worker's last sample (the agent page refreshes them). */
function agentStats(
  agentId: string,
  instance: NonNullable<Awaited<ReturnType<typeof getInstanceByUser>>>,
) {
  const view = instanceStatsView(instance);
  const live = instance.observed_state === "running" && instance.started_at !== null;
  return {
    agentId,
    cpu: view.cpu,
    memory: view.memory,
    pids: instance.pids === null ? "N/A" : String(instance.pids),
    uptime: live && instance.started_at ? Date.now() - instance.started_at.getTime() : 0,
    status: view.status,
    sampledAt: instance.sampled_at?.toISOString() ?? null,
  };
}

/** A loader's 404 (another user's agent included) as the page's "not found"; others rethrown. */
export function pageError(error: unknown): never {
  if (error instanceof DomainError && error.status === 404) {
    throw new Response(error.message, { status: 404 });
  }
  throw error;
}
