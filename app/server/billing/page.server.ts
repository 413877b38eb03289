import { z } from "zod";
import { listAgents } from "../agents/agents.server.ts";
import { providerNames } from "../ai/providers/shared.server.ts";
import { billingSummary, recentCredits, usageByDay } from "./account.server.ts";
import {
  addOns,
  creditPackIds,
  creditPacks,
  enterpriseSuite,
  planIds,
  plans,
} from "./catalog.server.ts";
import { downgradeWarning } from "./subscriptions.server.ts";

/** What the billing page shows (app/routes/billing.tsx). */
export async function billingPage(userId: string) {
  const [summary, usage, credits, agents] = await Promise.all([
    billingSummary(userId),
    usageByDay(userId, 30),
    recentCredits(userId, 10),
    listAgents(userId),
  ]);
  return {
    summary,
    usage: usage.days,
    credits,
    plans: plans.map((p) => ({
      id: p.id,
      name: p.name,
      pricePence: p.pricePence,
      limits: p.limits,
      // What switching to this plan would leave above its threads (nothing is stopped).
      warning: downgradeWarning(p.id, agents.length) ?? null,
    })),
    agentCount: agents.length,
    addOns: addOns.map((a) => ({
      id: a.id,
      name: a.name,
      pricePence: a.pricePence,
      fulfilment: a.fulfilment,
      gives: a.gives,
    })),
    suite: { name: enterpriseSuite.name, pricePence: enterpriseSuite.pricePence },
    packs: creditPacks.map((c) => ({ id: c.id, credits: c.credits, priceCents: c.priceCents })),
    providers: [...providerNames],
  };
}

/** The forms of the page, by `intent` (server-only: it names server constants). */
export const billingPageActions = z.discriminatedUnion("intent", [
  z.object({ intent: z.literal("plan"), plan: z.enum(planIds, { error: "Unknown plan" }) }),
  z.object({ intent: z.literal("addon"), addon: z.string().max(100) }),
  z.object({
    intent: z.literal("request-addon"),
    addon: z.string().max(100),
    note: z.string().max(2000).optional(),
  }),
  z.object({ intent: z.literal("suite") }),
  z.object({
    intent: z.literal("credits"),
    pack: z.enum(creditPackIds, { error: "Unknown pack" }),
  }),
  z.object({ intent: z.literal("portal") }),
  z.object({
    intent: z.literal("byok-enable"),
    provider: z.enum(providerNames, { error: "Unknown provider" }),
    apiKey: z.string({ error: "enter the whole key" }).trim().min(8, "enter the whole key"),
  }),
  z.object({ intent: z.literal("byok-disable"), provider: z.string().max(100).optional() }),
]);
