import type { TransactionSql } from "postgres";
import { z } from "zod";
import { TIER_IDS } from "../../schemas/agents.ts";
import { planLimits } from "../billing/catalog.server.ts";
import { activePlanItems, requireActiveSubscription } from "../billing/subscriptions.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { randomAlphanumeric } from "../platform/ids.server.ts";
import type { StatusFields } from "./instances.server.ts";

// Agents: one OpenClaw agent inside the user's instance each. This module owns the `agents`
// table: creation under the tier limit, ownership (another user's agent is "not found"), and
// the id's shape. The contract's views are agent-views.server.ts. docs/decisions/0060-agents.md

export type Tier = (typeof TIER_IDS)[number];
/** Agents per tier (contract "Limits"). */
export const TIER_LIMITS: Record<Tier, number> = { starter: 1, pro: 3, enterprise: 100 };

/** The gateway id of a user's first agent: the `main` agent every gateway (and pool) runs. */
export const FIRST_GATEWAY_AGENT_ID = "main";

export interface AgentRow {
  id: string;
  user_id: string;
  name: string;
  gateway_agent_id: string;
  model: string;
  tier: Tier;
  config: Record<string, unknown>;
  config_revision: number;
  applied_revision: number;
  applied_at: Date | null;
  apply_error: string | null;
  created_at: Date;
  updated_at: Date;
}

export const newAgentId = () => `agt_${randomAlphanumeric(20)}`;

/** The highest tier the user's live subscriptions cover (by the plans' agent threads). */
export async function tierOfUser(userId: string): Promise<Tier | undefined> {
  const items = await activePlanItems(userId);
  if (items.length === 0) return undefined;
  const threads = items.map((item) => planLimits(item).agentThreads ?? Number.POSITIVE_INFINITY);
  const most = Math.max(...threads);
  if (most <= TIER_LIMITS.starter) return "starter";
  if (most <= TIER_LIMITS.pro) return "pro";
  return "enterprise";
}

const tierRank = (tier: Tier) => TIER_IDS.indexOf(tier);

/**
 * Creates the agent record when the user's subscription allows it: 402 without an active
 * subscription or for a tier above the plan's, 429 when the user already has the tier's number
 * of agents. The user's row is locked for the count-and-insert, so concurrent requests cannot
 * both take the last place.
 */
export async function createAgentRecord(
  userId: string,
  input: { name: string; model: string; tier?: Tier; config?: Record<string, unknown> },
): Promise<AgentRow> {
  await requireActiveSubscription(userId);
  const allowed = await tierOfUser(userId);
  if (!allowed) throw new DomainError(402, "An active subscription is required: see /pricing");
  const tier = input.tier ?? allowed;
  if (tierRank(tier) > tierRank(allowed)) {
    throw new DomainError(402, `Your plan covers the ${allowed} tier, not ${tier}: see /pricing`);
  }
  return db().begin(async (tx) => {
    await tx`select id from users where id = ${userId} for update`;
    const [counted] = await tx<{ count: number }[]>`
      select count(*)::int as count from agents where user_id = ${userId}`;
    const count = counted?.count ?? 0;
    const limit = TIER_LIMITS[tier];
    if (count >= limit) {
      throw new DomainError(
        429,
        `Agent limit reached: the ${tier} tier allows ${limit} agent${limit === 1 ? "" : "s"}`,
      );
    }
    const id = newAgentId();
    const gatewayAgentId =
      count === 0 ? FIRST_GATEWAY_AGENT_ID : await freeGatewayId(tx, userId, id);
    const [row] = await tx<AgentRow[]>`
      insert into agents (id, user_id, name, gateway_agent_id, model, tier, config)
      values (${id}, ${userId}, ${input.name}, ${gatewayAgentId}, ${input.model}, ${tier},
              ${tx.json((input.config ?? {}) as never)})
      returning *`;
    await recordAudit(
      { action: "agent.provisioned", userId, target: id, details: { name: input.name, tier } },
      tx,
    );
    return row as AgentRow;
  }) as Promise<AgentRow>;
}

/** `main` when the user's first agent was deleted, else the agent's own id. */
async function freeGatewayId(tx: TransactionSql, userId: string, agentId: string): Promise<string> {
  const [main] = await tx`
    select 1 from agents where user_id = ${userId} and gateway_agent_id = ${FIRST_GATEWAY_AGENT_ID}`;
  return main ? agentId.replace("_", "-") : FIRST_GATEWAY_AGENT_ID;
}

export async function listAgents(userId: string): Promise<AgentRow[]> {
  return db()<AgentRow[]>`
    select * from agents where user_id = ${userId} order by created_at, id`;
}

/** The columns an agent summary shows. */
export type AgentSummaryRow = Pick<
  AgentRow,
  "id" | "user_id" | "name" | "model" | "created_at" | "updated_at"
>;

/** A summary row with its instance's status fields (null without an instance). */
export type AgentListRow = AgentSummaryRow & {
  observed_state: StatusFields["observed_state"] | null;
  desired_state: StatusFields["desired_state"] | null;
  health: StatusFields["health"] | null;
};

/**
 * `listAgents` narrowed to what a summary shows (a list read parses no config JSON), with the
 * status fields of the user's instance: one statement for the agents list.
 */
export async function listAgentSummaryRows(userId: string): Promise<AgentListRow[]> {
  return db()<AgentListRow[]>`
    select a.id, a.user_id, a.name, a.model, a.created_at, a.updated_at,
      i.observed_state, i.desired_state, i.health
    from agents a left join instances i on i.user_id = a.user_id
    where a.user_id = ${userId} order by a.created_at, a.id`;
}

/** The instance's status fields of a list row; undefined when the user has no instance. */
export function instanceStatusOf(row: AgentListRow): StatusFields | undefined {
  const { observed_state, desired_state, health } = row;
  return observed_state && desired_state && health
    ? { observed_state, desired_state, health }
    : undefined;
}

/** The agent when it belongs to the user; 404 otherwise (never reveal another user's). */
export async function getOwnedAgent(userId: string, agentId: string): Promise<AgentRow> {
  const [row] = await db()<AgentRow[]>`
    select * from agents where id = ${agentId} and user_id = ${userId}`;
  if (!row) throw new DomainError(404, "Agent not found");
  return row;
}

/** The agent a gateway session key (`agent:<gateway agent id>:…`) belongs to, if any. */
export async function agentOfSessionKey(
  userId: string,
  sessionKey: string,
): Promise<AgentRow | undefined> {
  const gatewayAgentId = /^agent:([^:]+):/.exec(sessionKey)?.[1] ?? FIRST_GATEWAY_AGENT_ID;
  const [row] = await db()<AgentRow[]>`
    select * from agents where user_id = ${userId} and gateway_agent_id = ${gatewayAgentId}`;
  return row;
}

/** The `:id` of /api/agents/:id routes. */
export const agentParams = z.object({
  id: z
    .string()
    .min(1)
    .max(64)
    .regex(/^[A-Za-z0-9_-]+$/, "must be an agent id"),
});
