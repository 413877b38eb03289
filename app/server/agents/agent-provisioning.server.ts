import { z } from "zod";
import { CUSTOM_MODEL, TIER_IDS } from "../../schemas/agents.ts";
import { frontendModels } from "../ai/models.server.ts";
import { currentPlanSubscription } from "../billing/subscriptions.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import { logger } from "../platform/logger.server.ts";
import { agentConfigSchema } from "./agent-config.server.ts";
import { agentSummaries, agentSummary } from "./agent-views.server.ts";
import { createAgentRecord } from "./agents.server.ts";
import { awaitJob, getInstanceByUser, provisionInstance } from "./instances.server.ts";

// POST /api/agents/provision: the agent record under the tier limit, the user's instance when
// it has none, and a worker job writing the user's agents into the gateway's config.

export const provisionInputSchema = z.object({
  name: z
    .string({ error: "name is required" })
    .trim()
    .min(1, "name is required")
    .max(100, "name must be at most 100 characters"),
  model: z.string().trim().min(1).max(200).optional(),
  config: agentConfigSchema.optional(),
  tier: z.enum(TIER_IDS, { error: `tier must be one of ${TIER_IDS.join(", ")}` }).optional(),
});
export type AgentProvisionInput = z.input<typeof provisionInputSchema>;

/**
 * The model options: the AI layer's catalog ids (first = default), then `custom`. A catalog
 * that cannot be listed leaves `custom` only (provisioning never fails on the listing).
 */
export async function modelOptions(): Promise<string[]> {
  try {
    const models = await frontendModels();
    return [...models.map((m) => m.id), CUSTOM_MODEL];
  } catch (error) {
    logger().warn({ err: error }, "model catalog unavailable: offering only the custom model");
    return [CUSTOM_MODEL];
  }
}

/** Enqueues the worker job that writes all of the user's agents into the gateway's config. */
export async function requestAgentSync(userId: string): Promise<string | undefined> {
  try {
    return await sendJob("sync-agents", { userId });
  } catch (error) {
    // The stored rows are the truth; the next instance start/repair/reconcile re-applies them.
    logger().warn({ err: error, userId }, "sync-agents could not be enqueued");
    return undefined;
  }
}

export async function provisionAgent(userId: string, rawInput: AgentProvisionInput) {
  const parsed = provisionInputSchema.safeParse(rawInput);
  if (!parsed.success) {
    throw new DomainError(400, parsed.error.issues.map((i) => i.message).join("; "));
  }
  const input = parsed.data;
  const options = await modelOptions();
  const model = input.model ?? options[0] ?? CUSTOM_MODEL;
  if (!options.includes(model)) {
    throw new DomainError(400, `Unknown model ${model}: choose one of ${options.join(", ")}`);
  }
  const row = await createAgentRecord(userId, {
    name: input.name,
    model,
    tier: input.tier,
    config: input.config,
  });
  let instance = await getInstanceByUser(userId);
  if (!instance?.container_id) {
    // No instance yet (or never provisioned): provisioning also applies the agents at its end.
    // The container's resources follow the user's monthly plan (solo when it is an API plan).
    const plan = (await currentPlanSubscription(userId))?.item;
    const started = await provisionInstance(userId, {
      plan,
      model: model === CUSTOM_MODEL ? undefined : model,
    });
    await requestAgentSync(userId);
    // A warm-pool adoption takes a second or two: answer `running` then; a cold start answers
    // `provisioning` and the list shows when it is up.
    const wait = env().AGENT_PROVISION_WAIT_MS;
    if (wait > 0) await awaitJob("provision-instance", started.jobId, wait);
    instance = (await getInstanceByUser(userId)) ?? started.instance;
  } else {
    await requestAgentSync(userId);
  }
  const { updatedAt: _updated, ...agent } = agentSummary(row, instance);
  return { success: true, agent };
}

/** GET /api/agents/provision: the user's agents and the model options. */
export async function provisionedAgents(userId: string) {
  const [agents, models] = await Promise.all([agentSummaries(userId), modelOptions()]);
  return { success: true, agents, count: agents.length, models };
}
