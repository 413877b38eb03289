import { randomUUID } from "node:crypto";
import { db } from "../platform/db.server.ts";
import { isDatabaseUnavailable } from "../platform/db-unavailable.server.ts";
import { logger } from "../platform/logger.server.ts";
import { recordAiCall } from "./ai-metrics.server.ts";
import type { Reservation } from "./budgets.server.ts";
import {
  LEASE_IDLE_MS,
  markReleased,
  releasable,
  retireIdle,
  returnDraw,
  settled,
} from "./credit-leases.server.ts";
import { type JournalCall, MeteringJournal } from "./metering-journal.server.ts";
import type { ProviderName } from "./providers/shared.server.ts";

// Every call through the layer leaves one ai_usage row. For a user in credits mode the same
// transaction replaces the call's reservation with the real debit in credit_ledger, capped so a
// balance never goes below zero (the rest is recorded as uncollected). Writes happen after the
// answer has been sent (or while a stream flows), so they never delay it; `flushMetering` lets
// tests and shutdown wait for them.

export interface UsageRecord {
  userId: string | null;
  instanceId: string | null;
  /**
   * The agent a gateway's call names (decision 0225): kept only when it is an agent of
   * `userId`, the token's owner; otherwise the call is attributed as without it.
   */
  agentHint?: string | null;
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
  /**
   * The provider reported usage over the bounds the call was held for (`costMicroUsd` is then
   * what was charged, at most the hold): recorded in ai_usage_anomalies (decision 0096), and
   * the excess counted in the usage row's uncollected_micro_usd for credits (decision 0206).
   */
  anomaly?: { promptBound: number; completionBound: number; reportedCostMicroUsd: number };
}

// Settlement is write-behind and batched: meter() queues the call and returns; one flush at a
// time writes everything queued since the last one in a single transaction (usage rows, each
// user's account, the ledger, the leases' holds). Under load a flush carries many calls, so a
// user's calls no longer queue on their account row one by one (docs/decisions/0025).

interface Queued {
  id: string;
  /** When the call was metered (its row's created_at, not the flush's). */
  at: Date;
  record: UsageRecord;
  reservation: Reservation | undefined;
  resolve: (id: string | undefined) => void;
  /** A write of it failed with the database unreachable: it may have committed all the same. */
  retried?: boolean;
  /** From a dead process's journal: charged without a hold (that process's went stale). */
  recovered?: boolean;
}

let queue: Queued[] = [];
/** What this process answered and has not written yet, on disk (decision 0245). */
const journal = new MeteringJournal<UsageRecord>();
let journalFailed = false;
const journalled = (q: Queued): JournalCall<UsageRecord> => ({
  id: q.id,
  at: q.at.toISOString(),
  record: q.record,
});

/** A journal write that fails (a full disk) loses only the crash cover, never the call. */
function journalling(write: () => void): void {
  try {
    write();
    journalFailed = false;
  } catch (error) {
    if (!journalFailed) logger().error({ err: error }, "the metering journal cannot be written");
    journalFailed = true;
  }
}
let flushing: Promise<void> | undefined;
let timer: NodeJS.Timeout | undefined;
/** Flushes in a row that failed with the database unreachable, and when the next may run. */
let unreachable = { failures: 0, until: 0 };
/** The wait before writing again after the n-th failure in a row: 250 ms doubling to 5 s. */
const retryDelay = (failures: number) => Math.min(250 * 2 ** (failures - 1), 5_000);

/** Waits until every usage write started so far has finished, and gives idle leases back. */
export async function flushMetering(): Promise<void> {
  for (;;) {
    retireIdle(true);
    if (flushing) await flushing;
    else if (queue.length > 0 || releasable().length > 0) await flushNow();
    else return;
  }
}

/** Rough token count (≈4 characters per token) for when a provider reports no usage. */
export const countTokens = (text: string): number => (text ? Math.ceil(text.length / 4) : 0);

function scheduleFlush(): void {
  if (flushing || timer) return;
  // Next turn of the event loop: the answer has gone out, and calls finishing together share
  // one transaction.
  timer = setTimeout(() => {
    timer = undefined;
    void flushNow();
  }, 0);
}

/**
 * Calls per transaction: bounds the insert's bind parameters (18 per usage row, PostgreSQL
 * allows 65,535), however many calls queued up while the previous flush ran.
 */
export const MAX_FLUSH_CALLS = 1000;

function flushNow(): Promise<void> {
  if (flushing) return flushing;
  const wait = unreachable.until - Date.now();
  if (wait > 0) {
    // After a failed write: the next waits its turn (flushMetering waits with it).
    flushing = new Promise<void>((r) => setTimeout(r, wait)).then(() => {
      flushing = undefined;
      return flushNow();
    });
    return flushing;
  }
  const batch = queue.length <= MAX_FLUSH_CALLS ? queue : queue.slice(0, MAX_FLUSH_CALLS);
  queue = queue.length <= MAX_FLUSH_CALLS ? [] : queue.slice(MAX_FLUSH_CALLS);
  flushing = writeBatch(batch)
    .then(() => {
      unreachable = { failures: 0, until: 0 };
    })
    .catch((error: unknown) => {
      if (isDatabaseUnavailable(error)) {
        // Calls that were answered are owed: kept, in order, and written once the database
        // answers again (the soak's database restart, issue 52). Only a process that dies
        // meanwhile loses them.
        const failures = unreachable.failures + 1;
        unreachable = { failures, until: Date.now() + retryDelay(failures) };
        for (const q of batch) q.retried = true;
        queue = [...batch, ...queue];
        logger().warn(
          { err: error, calls: batch.length, retryInMs: retryDelay(failures) },
          "AI usage not recorded yet: the database is unreachable; trying again",
        );
        return;
      }
      logger().error({ err: error, calls: batch.length }, "AI usage could not be recorded");
      journalling(() => journal.done(batch.map((q) => q.id))); // not tried again at each start
      for (const q of batch) q.resolve(undefined);
    })
    .finally(() => {
      flushing = undefined;
      journalling(() => journal.compact(queue.map(journalled)));
      if (queue.length > 0 || releasable().length > 0) scheduleFlush();
    });
  return flushing;
}

/** After its transaction committed: the leases' holds in memory follow, the callers learn. */
function settleInMemory(batch: Queued[], releases: ReturnType<typeof releasable>): void {
  // The same order as the write, so each call's share of the hold matches what was written.
  for (const { record, reservation } of batch) {
    if (!reservation || !record.userId) continue;
    const lease = reservation.lease;
    settled(lease, Math.max(0, Math.min(record.costMicroUsd, lease.dbHeld)));
  }
  for (const lease of releases) markReleased(lease);
  journalling(() => journal.done(batch.map((q) => q.id)));
  for (const q of batch) q.resolve(q.id);
}

/**
 * Calls of a failed write that committed all the same (the connection died after the commit,
 * before its answer): their rows are there. Their whole transaction was, so they are settled
 * in memory and not written again; the others are returned.
 */
async function notYetWritten(batch: Queued[]): Promise<Queued[]> {
  const retried = batch.filter((q) => q.retried).map((q) => q.id);
  if (retried.length === 0) return batch;
  const written = new Set(
    (await db()<{ id: string }[]>`select id from ai_usage where id = any(${retried}::text[])`).map(
      (r) => r.id,
    ),
  );
  if (written.size === 0) return batch;
  settleInMemory(
    batch.filter((q) => written.has(q.id)),
    [],
  );
  return batch.filter((q) => !written.has(q.id));
}

async function writeBatch(queued: Queued[]): Promise<void> {
  const batch = await notYetWritten(queued);
  const releases = releasable();
  if (batch.length === 0 && releases.length === 0) return;
  await db().begin(async (tx) => {
    // Per user: what leaves the leases' holds, today's spend, and the credits to debit.
    const perUser = new Map<string, { consumed: number; spent: number; charge: number }>();
    const perLease = new Map<string, { lease: Reservation["lease"]; consumed: number }>();
    for (const { record, reservation, recovered } of batch) {
      if (!record.userId || (!reservation && !recovered)) continue;
      const u = perUser.get(record.userId) ?? { consumed: 0, spent: 0, charge: 0 };
      if (reservation) {
        const lease = reservation.lease;
        const entry = perLease.get(lease.id) ?? { lease, consumed: 0 };
        const consumed = Math.min(record.costMicroUsd, lease.dbHeld - entry.consumed);
        entry.consumed += Math.max(0, consumed);
        perLease.set(lease.id, entry);
        u.consumed += Math.max(0, consumed);
      }
      u.spent += record.costMicroUsd;
      if (record.billingMode === "credits") u.charge += record.costMicroUsd;
      perUser.set(record.userId, u);
    }
    // Each account in one statement: the UPDATE locks the row, and what it returns is the balance
    // as locked (it does not change it: the balance follows the ledger rows below through the
    // trigger credit_ledger_ai_accounts), to cap the debit. Sent at once with the leases' holds:
    // one round trip instead of two per user plus one per lease. A flush of one call (one request
    // at a time) took 7 round trips, each waking the event loop while later requests were served
    // (docs/decisions/0088).
    //
    // Every account the flush touches is locked in user-id order: other processes' flushes lock
    // the same rows, and two flushes locking them in opposite orders deadlock (one batch lost).
    // An account that only gets a lease back (below) is locked here too, by a select.
    const debits = new Map<string, number>();
    const first: Array<Promise<unknown>> = [];
    const accounts = [...new Set([...perUser.keys(), ...releases.map((l) => l.userId)])].sort();
    for (const userId of accounts) {
      const u = perUser.get(userId);
      if (!u) {
        first.push(tx`select 1 from ai_accounts where user_id = ${userId} for update`);
        continue;
      }
      first.push(
        tx<{ balance: number }[]>`
          update ai_accounts set
            held_micro_usd = greatest(0, held_micro_usd - ${u.consumed}),
            spent_today_micro_usd = case when spend_day = (now() at time zone 'utc')::date
              then spent_today_micro_usd else 0 end + ${u.spent},
            spend_day = (now() at time zone 'utc')::date,
            updated_at = now()
          where user_id = ${userId}
          returning balance_micro_usd as balance`.then(([row]) =>
          debits.set(userId, Math.min(u.charge, Math.max(row?.balance ?? 0, 0))),
        ),
      );
    }
    for (const { lease, consumed } of perLease.values()) {
      if (consumed > 0) {
        first.push(tx`update ai_reservations set amount_micro_usd = amount_micro_usd - ${consumed}
          where id = ${lease.id}`);
      }
    }
    await Promise.all(first);
    // Usage rows and ledger rows; a debit capped at the balance is spread over the user's calls
    // in order, the rest recorded as uncollected.
    const usage = [];
    const ledger = [];
    for (const { id, at, record } of batch) {
      const charge = record.billingMode === "credits" && record.userId ? record.costMicroUsd : 0;
      const left = record.userId ? (debits.get(record.userId) ?? 0) : 0;
      const debit = Math.min(charge, left);
      if (record.userId) debits.set(record.userId, left - debit);
      // What the provider reported beyond the hold was never charged: counted as uncollected
      // too, so the operators' total (console, metric) shows it (decision 0206).
      const over =
        charge > 0 && record.anomaly
          ? Math.max(0, record.anomaly.reportedCostMicroUsd - record.costMicroUsd)
          : 0;
      usage.push({
        id,
        user_id: record.userId,
        instance_id: record.instanceId,
        agent_hint: record.agentHint ?? null,
        endpoint: record.endpoint,
        provider: record.provider,
        model: record.model,
        prompt_tokens: record.promptTokens,
        completion_tokens: record.completionTokens,
        tokens_estimated: record.tokensEstimated,
        cost_micro_usd: record.costMicroUsd,
        uncollected_micro_usd: charge - debit + over,
        billing_mode: record.billingMode,
        stream: record.stream,
        latency_ms: Math.round(record.latencyMs),
        status: record.status,
        http_status: record.httpStatus,
        error: record.error?.slice(0, 500) ?? null,
        created_at: at,
      });
      if (debit > 0) {
        ledger.push({
          id: `led_${id}`,
          user_id: record.userId,
          amount_micro_usd: -debit,
          reason: `ai-usage:${record.model}`,
          created_at: at,
        });
      }
    }
    // One text[] parameter per column and unnest, not 18 parameters per row: a backlog flush of
    // 1000 calls used to build and bind 18,000 parameters on the event loop, blocking it for
    // 10-25 ms at a time while the requests after a burst waited (decision 0086).
    const col = <R>(rows: R[], f: (r: R) => unknown) =>
      tx.array(
        rows.map((r) => {
          const v = f(r);
          return v === null || v === undefined
            ? null
            : v instanceof Date
              ? v.toISOString()
              : String(v);
        }) as string[],
        25, // text
      );
    // The rows and the releases, sent at once too.
    const second: Array<Promise<unknown>> = [];
    if (usage.length > 0) {
      // A gateway's call is attributed to the person and agent of the platform's turn running
      // on its instance when it was made, when exactly one person (or agent) fits (decision
      // 0215, ai/turns.server.ts); the grace covers the turn's end being written after it, and a
      // turn never ended (a crash) stops counting after 10 minutes (a turn times out in 2).
      // A call that names its agent (decision 0225) is that agent's when the agent is the
      // owner's (another owner's id is ignored), and its person is that agent's turn's person,
      // none for a channel message or a heartbeat.
      second.push(tx`insert into ai_usage (id, user_id, instance_id, endpoint, provider, model,
          prompt_tokens, completion_tokens, tokens_estimated, cost_micro_usd, uncollected_micro_usd,
          billing_mode, stream, latency_ms, status, http_status, error, created_at,
          acting_user_id, agent_id)
        select t.id, t.user_id, instance_id, endpoint, provider, t.model, prompt_tokens::int,
          completion_tokens::int, tokens_estimated::boolean, cost_micro_usd::bigint,
          uncollected_micro_usd::bigint, billing_mode, stream::boolean, latency_ms::int, status,
          http_status::int, error, t.created_at::timestamptz, turn.person_id,
          coalesce(hinted.id, turn.agent_id)
        from unnest(${col(usage, (u) => u.id)}::text[], ${col(usage, (u) => u.user_id)}::text[],
          ${col(usage, (u) => u.instance_id)}::text[], ${col(usage, (u) => u.endpoint)}::text[],
          ${col(usage, (u) => u.provider)}::text[], ${col(usage, (u) => u.model)}::text[],
          ${col(usage, (u) => u.prompt_tokens)}::text[],
          ${col(usage, (u) => u.completion_tokens)}::text[],
          ${col(usage, (u) => u.tokens_estimated)}::text[],
          ${col(usage, (u) => u.cost_micro_usd)}::text[],
          ${col(usage, (u) => u.uncollected_micro_usd)}::text[],
          ${col(usage, (u) => u.billing_mode)}::text[], ${col(usage, (u) => u.stream)}::text[],
          ${col(usage, (u) => u.latency_ms)}::text[], ${col(usage, (u) => u.status)}::text[],
          ${col(usage, (u) => u.http_status)}::text[], ${col(usage, (u) => u.error)}::text[],
          ${col(usage, (u) => u.created_at)}::text[], ${col(usage, (u) => u.agent_hint)}::text[])
          as t(id, user_id, instance_id, endpoint, provider, model, prompt_tokens,
            completion_tokens, tokens_estimated, cost_micro_usd, uncollected_micro_usd,
            billing_mode, stream, latency_ms, status, http_status, error, created_at, agent_hint)
        left join agents hinted on hinted.id = t.agent_hint and hinted.user_id = t.user_id
        left join lateral (
          select
            case when count(r.person_id) = count(*) and count(distinct r.person_id) = 1
              then min(r.person_id) end as person_id,
            case when count(r.agent_id) = count(*) and count(distinct r.agent_id) = 1
              then min(r.agent_id) end as agent_id
          from ai_turns r
          where t.endpoint = 'agents' and r.instance_id = t.instance_id
            and r.started_at <= t.created_at::timestamptz + interval '2 seconds'
            and r.started_at > t.created_at::timestamptz - interval '10 minutes'
            and coalesce(r.ended_at, 'infinity') >= t.created_at::timestamptz - interval '2 seconds'
            and (hinted.id is null or r.agent_id = hinted.id)
        ) turn on true`);
    }
    if (ledger.length > 0) {
      second.push(tx`insert into credit_ledger (id, user_id, amount_micro_usd, reason, created_at)
        select id, user_id, amount::bigint, reason, created_at::timestamptz
        from unnest(${col(ledger, (l) => l.id)}::text[], ${col(ledger, (l) => l.user_id)}::text[],
          ${col(ledger, (l) => l.amount_micro_usd)}::text[], ${col(ledger, (l) => l.reason)}::text[],
          ${col(ledger, (l) => l.created_at)}::text[])
          as t(id, user_id, amount, reason, created_at)`);
    }
    // Usage over a call's bounds, for operators (rare: a statement only when there is any).
    const anomalies = batch.filter((q) => q.record.anomaly);
    if (anomalies.length > 0) {
      const a = (q: Queued) => q.record.anomaly!;
      second.push(tx`insert into ai_usage_anomalies (usage_id, user_id, provider, model,
          prompt_tokens, prompt_bound, completion_tokens, completion_bound,
          reported_cost_micro_usd, charged_micro_usd, created_at)
        select id, user_id, provider, model, prompt_tokens::int, prompt_bound::int,
          completion_tokens::int, completion_bound::int, reported::bigint, charged::bigint,
          created_at::timestamptz
        from unnest(${col(anomalies, (q) => q.id)}::text[],
          ${col(anomalies, (q) => q.record.userId)}::text[],
          ${col(anomalies, (q) => q.record.provider)}::text[],
          ${col(anomalies, (q) => q.record.model)}::text[],
          ${col(anomalies, (q) => q.record.promptTokens)}::text[],
          ${col(anomalies, (q) => a(q).promptBound)}::text[],
          ${col(anomalies, (q) => q.record.completionTokens)}::text[],
          ${col(anomalies, (q) => a(q).completionBound)}::text[],
          ${col(anomalies, (q) => a(q).reportedCostMicroUsd)}::text[],
          ${col(anomalies, (q) => q.record.costMicroUsd)}::text[],
          ${col(anomalies, (q) => q.at)}::text[])
          as t(id, user_id, provider, model, prompt_tokens, prompt_bound, completion_tokens,
            completion_bound, reported, charged, created_at)`);
    }
    // Retired leases whose calls are all settled give back what they still hold.
    for (const lease of releases) {
      second.push(tx`
        with gone as (delete from ai_reservations where id = ${lease.id} returning amount_micro_usd)
        update ai_accounts set held_micro_usd = greatest(0, held_micro_usd
          - coalesce((select amount_micro_usd from gone), 0))
        where user_id = ${lease.userId}`);
    }
    await Promise.all(second);
  });
  settleInMemory(batch, releases);
}

/** Records a call (and settles its reservation) in the background. */
export function meter(record: UsageRecord, reservation?: Reservation): Promise<string | undefined> {
  recordAiCall(record);
  if (reservation) returnDraw(reservation.lease, reservation.amountMicroUsd, record.costMicroUsd);
  return new Promise((resolve) => {
    const q: Queued = { id: `aiu_${randomUUID()}`, at: new Date(), record, reservation, resolve };
    journalling(() => journal.append(journalled(q)));
    queue.push(q);
    if (queue.length >= 500) void flushNow();
    else scheduleFlush();
  });
}

/**
 * Writes the calls that processes which died had answered and not written (their journals,
 * decision 0245), each once: a call whose row is there already is skipped. Run at start; the
 * calls are charged to the account as any call without a hold (the dead process's holds are
 * released by the stale-hold sweep). Returns how many of their calls are recorded now.
 */
export async function recoverMeteringJournals(): Promise<number> {
  let recorded = 0;
  for (const { file, calls: journalled } of MeteringJournal.orphans<UsageRecord>()) {
    // An account deleted since has no ledger to charge: its calls would fail the whole batch
    // they share with live calls.
    const named = [...new Set(journalled.map((c) => c.record.userId).filter((id) => id !== null))];
    const present = new Set(
      named.length === 0
        ? []
        : (await db()<{ id: string }[]>`select id from users where id = any(${named}::text[])`).map(
            (r) => r.id,
          ),
    );
    const calls = journalled.filter(
      (c) => c.record.userId === null || present.has(c.record.userId),
    );
    const done: Array<Promise<string | undefined>> = [];
    for (const call of calls) {
      done.push(
        new Promise((resolve) => {
          // `retried`: the dead process's batch may have committed before it died.
          const at = new Date(call.at);
          queue.push({
            ...call,
            at,
            reservation: undefined,
            resolve,
            retried: true,
            recovered: true,
          });
        }),
      );
    }
    await flushMetering();
    const now = (await Promise.all(done)).filter(Boolean).length;
    recorded += now;
    MeteringJournal.finished(file);
    if (journalled.length > 0) {
      logger().warn(
        {
          journal: file,
          calls: calls.length,
          recorded: now,
          accountsGone: journalled.length - calls.length,
        },
        "AI usage a stopped process had not recorded: recorded now",
      );
    }
  }
  return recorded;
}

// Leases nobody uses are given back within a few seconds (and on flushMetering).
const sweeper = setInterval(() => {
  retireIdle();
  if (releasable().length > 0) scheduleFlush();
}, LEASE_IDLE_MS);
sweeper.unref();
