import { randomUUID } from "node:crypto";
import { db } from "../platform/db.server.ts";
import { logger } from "../platform/logger.server.ts";
import { lockUser, type Reservation } from "./budgets.server.ts";
import type { ProviderName } from "./providers/shared.server.ts";

// Every call through the layer leaves one ai_usage row. For a user in credits mode the same
// transaction replaces the call's reservation with the real debit in credit_ledger, capped so a
// balance never goes below zero (the rest is recorded as uncollected). Writes happen after the
// answer has been sent (or while a stream flows), so they never delay it; `flushMetering` lets
// tests and shutdown wait for them.

export interface UsageRecord {
  userId: string | null;
  instanceId: string | null;
  endpoint: "chat" | "agents";
  provider: ProviderName | null;
  model: string;
  promptTokens: number;
  completionTokens: number;
  tokensEstimated: boolean;
  costMicroUsd: number;
  billingMode: "credits" | "byok" | "none";
  stream: boolean;
  latencyMs: number;
  status: "ok" | "error" | "client_error";
  httpStatus: number;
  error: string | null;
}

const pending = new Set<Promise<unknown>>();

/** Waits until every usage write started so far has finished. */
export async function flushMetering(): Promise<void> {
  while (pending.size > 0) await Promise.allSettled([...pending]);
}

/** Rough token count (≈4 characters per token) for when a provider reports no usage. */
export const countTokens = (text: string): number => (text ? Math.ceil(text.length / 4) : 0);

async function write(record: UsageRecord, reservation: Reservation | undefined): Promise<string> {
  const id = `aiu_${randomUUID()}`;
  const row = {
    id,
    user_id: record.userId,
    instance_id: record.instanceId,
    endpoint: record.endpoint,
    provider: record.provider,
    model: record.model,
    prompt_tokens: record.promptTokens,
    completion_tokens: record.completionTokens,
    tokens_estimated: record.tokensEstimated,
    cost_micro_usd: record.costMicroUsd,
    uncollected_micro_usd: 0,
    billing_mode: record.billingMode,
    stream: record.stream,
    latency_ms: Math.round(record.latencyMs),
    status: record.status,
    http_status: record.httpStatus,
    error: record.error?.slice(0, 500) ?? null,
  };
  if (!reservation || !record.userId) {
    await db()`insert into ai_usage ${db()(row)}`;
    return id;
  }
  const userId = record.userId;
  await db().begin(async (tx) => {
    await lockUser(tx, userId);
    await tx`delete from ai_reservations where id = ${reservation.id}`;
    if (record.billingMode === "credits" && record.costMicroUsd > 0) {
      const [b] = await tx<{ balance: number }[]>`select coalesce(sum(amount_micro_usd), 0)::bigint
        as balance from credit_ledger where user_id = ${userId}`;
      const debit = Math.min(record.costMicroUsd, Math.max(0, b?.balance ?? 0));
      row.uncollected_micro_usd = record.costMicroUsd - debit;
      if (debit > 0) {
        await tx`insert into credit_ledger (id, user_id, amount_micro_usd, reason)
          values (${`led_${id}`}, ${userId}, ${-debit}, ${`ai-usage:${record.model}`})`;
      }
    }
    await tx`insert into ai_usage ${tx(row)}`;
  });
  return id;
}

/** Records a call (and settles its reservation) in the background. */
export function meter(record: UsageRecord, reservation?: Reservation): Promise<string | undefined> {
  const p = write(record, reservation).catch((error: unknown) => {
    logger().error({ err: error, model: record.model }, "AI usage could not be recorded");
    return undefined;
  });
  pending.add(p);
  void p.finally(() => pending.delete(p));
  return p;
}
