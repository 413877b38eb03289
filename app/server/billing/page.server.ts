import { listAgents } from "../agents/agents.server.ts";
import { providerNames } from "../ai/providers/shared.server.ts";
import { billingSummary, recentCredits, usageByDay } from "./account.server.ts";
import { addOns, creditPacks, enterpriseSuite, plans } from "./catalog.server.ts";
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
