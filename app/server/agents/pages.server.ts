import { z } from "zod";
import { CUSTOM_MODEL, LOG_LEVELS, TIER_IDS } from "../../schemas/agents.ts";
import { modelSource } from "../ai/model-source.server.ts";
import { frontendModels } from "../ai/models.server.ts";
import { selfHosted } from "../billing/plan-assignments.server.ts";
import { hasActiveSubscription } from "../billing/subscriptions.server.ts";
import { listWebauthnCredentials } from "../identity/webauthn.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { consume, rateLimitScopes } from "../platform/rate-limit.server.ts";
import { agentLogs } from "./agent-logs.server.ts";
import { agentMessages } from "./agent-messages.server.ts";
import { modelOptions, provisionAgent } from "./agent-provisioning.server.ts";
import { agentStats } from "./agent-stats.server.ts";
import {
  readAgentVerification,
  removeAgentVerification,
  submitAgentVerification,
} from "./agent-verification.server.ts";
import {
  agentDetail,
  agentSummaries,
  provisionQueueView,
  wakeQueueView,
} from "./agent-views.server.ts";
import { getOwnedAgent, TIER_LIMITS, type Tier, tierOfUser } from "./agents.server.ts";
import {
  backupParams,
  deleteBackup,
  listBackups,
  requestBackup,
  requestRestore,
} from "./backups.server.ts";
import { cloneAgentFor } from "./clone-agent.server.ts";
import { deleteAgent } from "./delete-agent.server.ts";
import {
  agentStatus,
  contractStatus,
  getInstanceByUser,
  repairInstance,
  resetInstanceMemory,
  restartInstance,
  startInstance,
  stopInstance,
  updateInstanceImage,
} from "./instances.server.ts";
import { instanceProgress } from "./progress.server.ts";

// What the dashboard pages (app/routes/agents*.tsx) need, on top of the agents API's service
// functions: every function takes the signed-in user's id, and another user's agent is 404.
// docs/decisions/0070-agents-dashboard.md

/** The provision form's model options (the API's, first = default) with readable names. */
export async function modelChoices(): Promise<Array<{ id: string; name: string }>> {
  const [ids, catalog] = await Promise.all([
    modelOptions(),
    frontendModels().catch(() => []), // names only; modelOptions already handles an outage
  ]);
  const names = new Map(catalog.map((m) => [m.id, m.name]));
  return ids.map((id) => ({
    id,
    name: id === CUSTOM_MODEL ? "Custom (the instance's default model)" : (names.get(id) ?? id),
  }));
}

/**
 * Page actions count against the same per-user budgets as the API (`agents` for provisioning,
 * configuration and verification, `instance` for lifecycle operations), so the dashboard is no
 * way around them. Loaders are not counted: the live refresh would use the budget up.
 */
export async function limitPageAction(userId: string, scope: "agents" | "instance") {
  const decision = await consume(scope, `user:${userId}`);
  if (!decision.allowed) {
    const { points, duration } = rateLimitScopes[scope];
    throw new DomainError(429, `Too many requests: limit is ${points} per ${duration} seconds`);
  }
}

/** The list page: agents with live status, and what the provision form may offer. */
export async function agentsOverview(userId: string) {
  const [agents, subscribed, tier, models] = await Promise.all([
    agentSummaries(userId),
    hasActiveSubscription(userId),
    tierOfUser(userId),
    modelChoices(),
  ]);
  const tiers = tier ? TIER_IDS.slice(0, TIER_IDS.indexOf(tier) + 1) : [];
  return {
    agents,
    subscribed,
    tier: tier ?? null,
    tiers: tiers.map((t) => ({ id: t, limit: TIER_LIMITS[t] })),
    limit: tier ? TIER_LIMITS[tier] : 0,
    models,
    /** No payment processor: plans come from the operator, not /pricing (decision 0100). */
    selfHosted: selfHosted(),
  };
}

/** The provision form's submission, through the API's provisioning (same checks, same errors). */
export async function provisionFromPage(
  userId: string,
  input: { name: string; model: string; tier?: Tier | undefined },
) {
  await limitPageAction(userId, "agents");
  const { agent } = await provisionAgent(userId, input);
  return agent;
}

/** The agent page's confirmed delete (the same service as DELETE /api/agents/:id). */
export async function deleteAgentFromPage(userId: string, agentId: string) {
  await limitPageAction(userId, "agents");
  return deleteAgent(userId, agentId);
}

export const LIFECYCLE_INTENTS = [
  "start",
  "stop",
  "restart",
  "update",
  "repair",
  "reset-memory",
] as const;
export type LifecycleIntent = (typeof LIFECYCLE_INTENTS)[number];

/** A lifecycle button: the agent must be the user's (404), then its instance is acted on. */
export async function agentLifecycle(userId: string, agentId: string, intent: LifecycleIntent) {
  await getOwnedAgent(userId, agentId);
  await limitPageAction(userId, "instance");
  switch (intent) {
    case "start":
      return startInstance(userId);
    case "stop":
      return stopInstance(userId);
    case "restart":
      return restartInstance(userId);
    case "update":
      return updateInstanceImage(userId);
    case "repair":
      return repairInstance(userId);
    case "reset-memory":
      return resetInstanceMemory(userId);
  }
}

/** Query parameters of the agent page; out-of-range values fall back to the defaults. */
export const agentPageQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).catch(50),
  offset: z.coerce.number().int().min(0).catch(0),
  level: z.enum(LOG_LEVELS).optional().catch(undefined),
});

/** Logs come from the running gateway; otherwise the page says why there are none. */
async function logsFor(
  userId: string,
  agentId: string,
  status: string,
  level: (typeof LOG_LEVELS)[number] | undefined,
) {
  // A stopped gateway would only time out: do not make the page wait for it.
  if (status !== "running") {
    return { logs: [], total: 0, unavailable: "Logs are read from the gateway while it runs." };
  }
  try {
    const { logs, total } = await agentLogs(userId, agentId, { limit: 50, level });
    return { logs, total, unavailable: null };
  } catch (error) {
    if (error instanceof DomainError && error.status === 502) {
      return { logs: [], total: 0, unavailable: `The gateway did not answer (${error.message}).` };
    }
    throw error;
  }
}

/** The status tab: detail, stats, verification, one page of messages. */
export async function agentPage(
  userId: string,
  agentId: string,
  query: z.infer<typeof agentPageQuery>,
) {
  const row = await getOwnedAgent(userId, agentId);
  const [{ agent }, live, verification, messages, securityKeys, models] = await Promise.all([
    agentDetail(userId, agentId),
    agentLive(userId, agentId),
    readAgentVerification(userId, agentId),
    agentMessages(userId, agentId, { limit: query.limit, offset: query.offset }),
    listWebauthnCredentials(userId),
    modelSource(userId),
  ]);
  const { backups } = await listBackups(userId, agentId);
  return {
    agent: {
      ...agent,
      tier: row.tier,
      createdAt: row.created_at.toISOString(),
      configApplied: row.applied_revision >= row.config_revision,
      applyError: row.apply_error,
    },
    live,
    verification,
    // The verification panel's security-key proof asks for one of these credentials.
    securityKeyIds: securityKeys.map((k) => k.id),
    messages,
    backups,
    /** Which model source serves the agent, or what is missing (before a chat fails on it). */
    modelSource: models,
  };
}

/** The logs tab: the gateway's log entries (optionally of one level), or why there are none. */
export async function agentLogsPage(
  userId: string,
  agentId: string,
  level: (typeof LOG_LEVELS)[number] | undefined,
) {
  const { agent } = await agentDetail(userId, agentId);
  const logs = await logsFor(userId, agentId, agent.status, level);
  return { agent: { id: agent.id, name: agent.name }, logs: { ...logs, level: level ?? null } };
}

/** What the agent page refreshes every few seconds: status and stats (cheap: database only). */
export async function agentLive(userId: string, agentId: string) {
  const [{ stats, status }, instance] = await Promise.all([
    agentStats(userId, agentId),
    getInstanceByUser(userId),
  ]);
  return {
    status: agentStatus(instance),
    progress: await instanceProgress(instance),
    wakeQueue: await wakeQueueView(instance),
    provisionQueue: await provisionQueueView(instance),
    lastError: instance && contractStatus(instance) === "error" ? instance.last_error : null,
    statsStatus: status,
    stats: stats as Record<string, string | number | boolean | null | undefined>,
    at: new Date().toISOString(),
  };
}

/** The verification panel's EAS form (a plain post): the API's checks, the API's errors. */
export async function verifyAgentWithEas(userId: string, agentId: string, attestationUid: string) {
  await getOwnedAgent(userId, agentId);
  if (!/^0x[0-9a-fA-F]{64}$/.test(attestationUid)) {
    throw new DomainError(400, "An EAS attestation UID is 0x followed by 64 hexadecimal digits");
  }
  await limitPageAction(userId, "agents");
  return submitAgentVerification(userId, agentId, { verificationType: "eas", attestationUid });
}

export async function unverifyAgent(userId: string, agentId: string) {
  await limitPageAction(userId, "agents");
  return removeAgentVerification(userId, agentId);
}

/** The backups section's forms: the API's services and budgets (a restore is a lifecycle step). */
export async function backupFromPage(
  userId: string,
  agentId: string,
  action: { intent: "backup" } | { intent: "restore" | "delete-backup"; backupId: string },
): Promise<string> {
  await limitPageAction(userId, action.intent === "delete-backup" ? "agents" : "instance");
  switch (action.intent) {
    case "backup":
      await requestBackup(userId, agentId);
      return "backup";
    case "restore": {
      const outcome = await requestRestore(userId, agentId, action.backupId);
      return outcome instanceof Response ? "restore-running" : "restored";
    }
    case "delete-backup":
      await deleteBackup(userId, agentId, action.backupId);
      return "backup-deleted";
  }
}

/** The agent page's clone button (the same service as POST /api/agents/:id/clone). */
export async function cloneFromPage(userId: string, agentId: string): Promise<string> {
  await limitPageAction(userId, "agents");
  const { agent } = await cloneAgentFor(userId, agentId, {});
  return agent.id;
}

/** A loader's 404 (another user's agent included) as the page's "not found"; others rethrown. */
export function pageError(error: unknown): never {
  if (error instanceof DomainError && error.status === 404) {
    throw new Response(error.message, { status: 404 });
  }
  throw error;
}

/** The forms of the page, by `intent` (server-only: it names server constants). */
export const agentPageActions = z.discriminatedUnion("intent", [
  z.object({ intent: z.enum(LIFECYCLE_INTENTS) }),
  // The service checks the UID's form (one message for the API and the page).
  z.object({ intent: z.literal("verify-eas"), attestationUid: z.string().max(200).optional() }),
  z.object({ intent: z.literal("unverify") }),
  z.object({ intent: z.literal("backup") }),
  z.object({ intent: z.literal("clone") }),
  z.object({
    intent: z.enum(["restore", "delete-backup"]),
    backupId: backupParams.shape.backupId,
  }),
  // Only the confirm step's form carries confirm=yes (the page works without JavaScript).
  z.object({ intent: z.literal("delete"), confirm: z.literal("yes").optional() }),
]);
