import { randomUUID } from "node:crypto";
import { db } from "../platform/db.server.ts";
import { logger } from "../platform/logger.server.ts";
import type { Reservation } from "./budgets.server.ts";
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
  const error = record.error?.slice(0, 500) ?? null;
  const latency = Math.round(record.latencyMs);
  if (!reservation || !record.userId) {
    await db()`insert into ai_usage (id, user_id, instance_id, endpoint, provider, model,
        prompt_tokens, completion_tokens, tokens_estimated, cost_micro_usd, billing_mode, stream,
        latency_ms, status, http_status, error)
      values (${id}, ${record.userId}, ${record.instanceId}, ${record.endpoint},
        ${record.provider}, ${record.model}, ${record.promptTokens}, ${record.completionTokens},
        ${record.tokensEstimated}, ${record.costMicroUsd}, ${record.billingMode}, ${record.stream},
        ${latency}, ${record.status}, ${record.httpStatus}, ${error})`;
    return id;
  }
  // One statement: release the reservation, add to today's spend, debit the cost (credits mode;
  // capped at the balance so it never goes below zero) and record the call.
  const charge = record.billingMode === "credits" ? record.costMicroUsd : 0;
  await db()`
    with released as (
      delete from ai_reservations where id = ${reservation.id} returning amount_micro_usd
    ), acct as (
      update ai_accounts set
        held_micro_usd = greatest(0, held_micro_usd
          - coalesce((select amount_micro_usd from released), 0)),
        spent_today_micro_usd = case when spend_day = (now() at time zone 'utc')::date
          then spent_today_micro_usd else 0 end + ${record.costMicroUsd},
        spend_day = (now() at time zone 'utc')::date,
        updated_at = now()
      where user_id = ${record.userId}
      returning least(${charge}::bigint, greatest(balance_micro_usd, 0)) as debit
    ), ledger as (
      insert into credit_ledger (id, user_id, amount_micro_usd, reason)
      select ${`led_${id}`}, ${record.userId}, -debit, ${`ai-usage:${record.model}`}
      from acct where debit > 0
    )
    insert into ai_usage (id, user_id, instance_id, endpoint, provider, model, prompt_tokens,
      completion_tokens, tokens_estimated, cost_micro_usd, uncollected_micro_usd, billing_mode,
      stream, latency_ms, status, http_status, error)
    values (${id}, ${record.userId}, ${record.instanceId}, ${record.endpoint}, ${record.provider},
      ${record.model}, ${record.promptTokens}, ${record.completionTokens},
      ${record.tokensEstimated}, ${record.costMicroUsd},
      ${charge} - coalesce((select debit from acct), 0), ${record.billingMode}, ${record.stream},
      ${latency}, ${record.status}, ${record.httpStatus}, ${error})`;
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
