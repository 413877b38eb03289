import { creditBalance, MICRO_USD_PER_CREDIT } from "../accounts/credits.server.ts";
import { removeUserKeys, setUserKey, userKeyProviders } from "../ai/byok.server.ts";
import { ProviderError, type ProviderName } from "../ai/providers/shared.server.ts";
import { clients, providerSettings } from "../ai/providers.server.ts";
import { dailyUsage } from "../ai/usage.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { versionedRead } from "../platform/read-cache.server.ts";
import { hasAddon, listOwnServiceRequests } from "./add-ons.server.ts";
import { addOns, planLimits } from "./catalog.server.ts";
import { defaultPlan, selfHosted } from "./plan-assignments.server.ts";
import { stripeConfigured } from "./stripe.server.ts";
import {
  billingHistory,
  effectivePlan,
  hasActiveSubscription,
  listSubscriptions,
  storageLimitGb,
} from "./subscriptions.server.ts";

// What the billing API and the billing page show about one user, and BYOK on/off.

export async function billingSummary(userId: string) {
  const { plan, source, operator } = await effectivePlan(userId);
  const subscriptions = await listSubscriptions(userId);
  const main = subscriptions.find(
    (s) => s.kind === "plan" || s.kind === "api" || s.kind === "suite",
  );
  const usage = await dailyUsage(userId, 30);
  const today = new Date().toISOString().slice(0, 10);
  const todays = usage.filter((u) => u.day === today);
  return {
    plan,
    status: main?.status ?? "none",
    active: await hasActiveSubscription(userId),
    currentPeriodEnd: main?.current_period_end?.toISOString() ?? null,
    cancelAtPeriodEnd: main?.cancel_at_period_end ?? false,
    limits: planLimits(plan),
    subscriptions: subscriptions.map((s) => ({
      id: s.id,
      kind: s.kind,
      item: s.item,
      status: s.status,
      currentPeriodEnd: s.current_period_end?.toISOString() ?? null,
      cancelAtPeriodEnd: s.cancel_at_period_end,
    })),
    credits: await creditBalance(userId),
    storage: { limitGb: await storageLimitGb(userId) },
    byok: await userKeyProviders(userId),
    usage: {
      today: {
        calls: todays.reduce((n, u) => n + u.calls, 0),
        costUsd: todays.reduce((n, u) => n + u.costMicroUsd, 0) / MICRO_USD_PER_CREDIT,
      },
      last30Days: {
        calls: usage.reduce((n, u) => n + u.calls, 0),
        costUsd: usage.reduce((n, u) => n + u.costMicroUsd, 0) / MICRO_USD_PER_CREDIT,
      },
    },
    history: await billingHistory(userId, 10),
    paymentsConfigured: stripeConfigured(),
    /** Where the plan comes from: subscription, assigned (by an operator), default, none. */
    planSource: source,
    /** Self-hosted mode (decision 0100): no processor; operators give plans and credits. */
    selfHosted: selfHosted(),
    operator: {
      assignedPlan: operator.source === "assigned" ? operator.plan : null,
      defaultPlan: defaultPlan(),
      contact: env().OPERATOR_CONTACT ?? null,
    },
    addOns: await Promise.all(
      addOns
        .filter((a) => a.fulfilment === "checkout")
        .map(async (a) => ({ id: a.id, active: await hasAddon(userId, a.id) })),
    ),
    serviceRequests: (await listOwnServiceRequests(userId)).map((r) => ({
      id: r.id,
      addon: r.addon,
      status: r.status,
      createdAt: r.createdAt,
    })),
  };
}

/** Usage per UTC day (summed over models) for the chart and get-usage. */
export async function usageByDay(userId: string, days = 30) {
  const rows = await dailyUsage(userId, days);
  // Summed in integer micro-USD, converted once per day (float sums drift).
  const byDay = new Map<string, { day: string; calls: number; tokens: number; micro: number }>();
  for (const r of rows) {
    const d = byDay.get(r.day) ?? { day: r.day, calls: 0, tokens: 0, micro: 0 };
    d.calls += r.calls;
    d.tokens += r.promptTokens + r.completionTokens;
    d.micro += r.costMicroUsd;
    byDay.set(r.day, d);
  }
  const perDay = [...byDay.values()].map(({ micro, ...d }) => ({
    ...d,
    costUsd: micro / MICRO_USD_PER_CREDIT,
  }));
  return { days: perDay, byModel: rows };
}

/** Checks the key against the provider (listing its models), then seals and stores it. */
export async function enableByok(userId: string, provider: ProviderName, apiKey: string) {
  const config = { ...providerSettings(provider), apiKey };
  try {
    await clients[provider].listModels(config, AbortSignal.timeout(15_000));
  } catch (error) {
    if (error instanceof ProviderError && [401, 403].includes(error.status)) {
      throw new DomainError(400, `apiKey: ${provider} rejected this key`);
    }
    if (error instanceof ProviderError && error.clientError) {
      throw new DomainError(400, `apiKey: ${provider} refused the key check (${error.status})`);
    }
    throw new DomainError(502, `Could not check the key with ${provider}; try again later`);
  }
  await setUserKey(userId, provider, apiKey);
  return { provider, keyProviders: await userKeyProviders(userId) };
}

export async function disableByok(userId: string, provider?: ProviderName) {
  const removed = await removeUserKeys(userId, provider);
  return { removed };
}

/** The balance and latest entries; kept while the user's ledger is unchanged (read-cache). */
export function recentCredits(userId: string, limit = 20) {
  return versionedRead(userId, `credits:${limit}`, () => readRecentCredits(userId, limit));
}

async function readRecentCredits(userId: string, limit: number) {
  // Both reads in one round trip.
  const [rows, balance] = await Promise.all([
    db()<
      {
        amount: number;
        reason: string;
        reference: string | null;
        note: string | null;
        created_at: Date;
      }[]
    >`select amount_micro_usd::bigint as amount, reason, reference, note, created_at from credit_ledger
    where user_id = ${userId} order by created_at desc, id desc limit ${limit}`,
    creditBalance(userId),
  ]);
  return {
    balance,
    entries: rows.map((r) => ({
      amount: Number(r.amount) / MICRO_USD_PER_CREDIT,
      reason: r.reason,
      reference: r.reason === "usage" ? null : r.reference,
      // An operator's grant says why (the operator's own words).
      ...(r.note ? { note: r.note } : {}),
      createdAt: r.created_at.toISOString(),
    })),
  };
}
