import { type Env, env, type SELF_HOSTED_PLANS } from "../platform/env.server.ts";

// What the platform sells, in one place: the four monthly GBP plans (with the agent threads and
// RAM the agent runtime enforces), the six add-ons, the Full Enterprise Suite, the billing API's
// USD plans, the credit packs and the storage upgrade. Each item's Stripe price id comes from
// configuration (STRIPE_PRICE_*); an item without one is shown but cannot be bought.
// docs/decisions/0041-billing-catalog-and-limits.md

type PriceVar = Extract<keyof Env, `STRIPE_PRICE_${string}`>;

export interface PlanLimits {
  /** Agent threads the plan allows; null means unlimited. */
  agentThreads: number | null;
  /** RAM per instance, in MiB. */
  ramMb: number;
  /** Extra gateway seats; null means unlimited. */
  gatewaySeats: number | null;
}

export interface Plan {
  id: "solo" | "collective" | "label" | "network";
  name: string;
  /** Monthly price in pence (GBP minor units). */
  pricePence: number;
  currency: "gbp";
  features: string[];
  limits: PlanLimits;
  priceVar: PriceVar;
}

export const plans: readonly Plan[] = [
  {
    id: "solo",
    name: "Solo",
    pricePence: 2900,
    currency: "gbp",
    features: ["1 agent thread", "chatapp1", "2GB RAM"],
    limits: { agentThreads: 1, ramMb: 2048, gatewaySeats: 0 },
    priceVar: "STRIPE_PRICE_SOLO",
  },
  {
    id: "collective",
    name: "Collective",
    pricePence: 6900,
    currency: "gbp",
    features: ["3 agent threads", "+1 gateway seat", "chatapp3", "4GB RAM"],
    limits: { agentThreads: 3, ramMb: 4096, gatewaySeats: 1 },
    priceVar: "STRIPE_PRICE_COLLECTIVE",
  },
  {
    id: "label",
    name: "Label",
    pricePence: 14900,
    currency: "gbp",
    features: ["10 agent threads", "+3 gateway seats", "white-label emails", "8GB RAM"],
    limits: { agentThreads: 10, ramMb: 8192, gatewaySeats: 3 },
    priceVar: "STRIPE_PRICE_LABEL",
  },
  {
    id: "network",
    name: "Network",
    pricePence: 49900,
    currency: "gbp",
    features: ["unlimited agents and gateway seats", "white-label reselling", "16GB RAM"],
    limits: { agentThreads: null, ramMb: 16384, gatewaySeats: null },
    priceVar: "STRIPE_PRICE_NETWORK",
  },
];

export const planIds = ["solo", "collective", "label", "network"] as const;
export type PlanId = (typeof planIds)[number];
// The environment's DEFAULT_PLAN choices are these ids and `none` (checked here at compile time).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameIds: Same<PlanId, Exclude<(typeof SELF_HOSTED_PLANS)[number], "none">> = true;
void sameIds;

/**
 * Plans that sell white-label emails (`label`: "white-label emails", `network`: "white-label
 * reselling", whose branding part is the same). docs/decisions/0207
 */
export const WHITE_LABEL_PLANS: readonly PlanId[] = ["label", "network"];
export const hasWhiteLabel = (plan: string): boolean =>
  (WHITE_LABEL_PLANS as readonly string[]).includes(plan);

/** Audit log retention in days, without and with the Audit Logs add-on. */
export const AUDIT_RETENTION_DAYS = { base: 90, withAddOn: 365 } as const;

export interface AddOn {
  id:
    | "audit-logs"
    | "slack"
    | "salesforce"
    | "api-access"
    | "custom-integration"
    | "account-manager";
  name: string;
  pricePence: number;
  currency: "gbp";
  /**
   * `checkout`: bought, and what it grants works at once. `request`: nothing automatic is
   * behind it, so it is asked for (a service request operators follow up) and never charged by
   * checkout. docs/decisions/0101-add-ons-sell-only-what-exists.md
   */
  fulfilment: "checkout" | "request";
  /** Exactly what the user gets, as the billing and pricing pages say it. */
  gives: string;
  /** Still read for `request` add-ons: subscriptions bought before keep syncing and can end. */
  priceVar: PriceVar;
}

export const addOns: readonly AddOn[] = [
  {
    id: "audit-logs",
    name: "Audit Logs",
    pricePence: 19900,
    currency: "gbp",
    fulfilment: "checkout",
    gives: `Your account's audit log is kept ${AUDIT_RETENTION_DAYS.withAddOn} days instead of ${AUDIT_RETENTION_DAYS.base}.`,
    priceVar: "STRIPE_PRICE_ADDON_AUDIT_LOGS",
  },
  {
    id: "slack",
    name: "Slack Integration",
    pricePence: 14900,
    currency: "gbp",
    fulfilment: "request",
    gives:
      "Agents have no Slack channel yet. Ask, and an operator sets Slack up for you and agrees the price before anything is charged.",
    priceVar: "STRIPE_PRICE_ADDON_SLACK",
  },
  {
    id: "salesforce",
    name: "Salesforce Connector",
    pricePence: 34900,
    currency: "gbp",
    fulfilment: "request",
    gives:
      "There is no built-in Salesforce connector. Ask, and an operator scopes a connection to your Salesforce org before anything is charged.",
    priceVar: "STRIPE_PRICE_ADDON_SALESFORCE",
  },
  {
    id: "api-access",
    name: "API Access",
    pricePence: 24900,
    currency: "gbp",
    fulfilment: "request",
    gives:
      "Every account already has API keys and the whole API at no charge. Ask here for higher limits or API support; an operator answers.",
    priceVar: "STRIPE_PRICE_ADDON_API_ACCESS",
  },
  {
    id: "custom-integration",
    name: "Custom Integration",
    pricePence: 49900,
    currency: "gbp",
    fulfilment: "request",
    gives:
      "Built to order: ask, and an operator contacts you to agree what to build and its price before anything is charged.",
    priceVar: "STRIPE_PRICE_ADDON_CUSTOM_INTEGRATION",
  },
  {
    id: "account-manager",
    name: "Dedicated Account Manager",
    pricePence: 39900,
    currency: "gbp",
    fulfilment: "request",
    gives:
      "A named person at the operator: ask, and they contact you to start before anything is charged.",
    priceVar: "STRIPE_PRICE_ADDON_ACCOUNT_MANAGER",
  },
];

export type AddOnId = AddOn["id"];

export const enterpriseSuite = {
  id: "suite",
  name: "Full Enterprise Suite",
  pricePence: 499900,
  currency: "gbp" as const,
  features: [
    "all six add-ons",
    "unlimited agents with task delegation",
    "SSO/SAML and RBAC",
    "credential isolation",
    "audit logging",
    "prebuilt connectors",
    "external-API tool framework",
    "hardware-agnostic deployment",
    "24/7 priority support with SLA",
    "mission-control dashboard",
  ],
  limits: { agentThreads: null, ramMb: 16384, gatewaySeats: null } satisfies PlanLimits,
  priceVar: "STRIPE_PRICE_ENTERPRISE_SUITE" as PriceVar,
};

/**
 * The billing API's plans (POST /api/billing create-checkout), priced in USD. Their amounts
 * are not in the contract: Stripe's price decides; agent limits follow the provisioning tiers
 * (starter 1, pro 3, enterprise 100 — `scale` is the enterprise tier).
 */
export const apiPlanIds = ["starter", "pro", "scale"] as const;
export type ApiPlanId = (typeof apiPlanIds)[number];
export const apiPlans: readonly {
  id: ApiPlanId;
  name: string;
  currency: "usd";
  limits: PlanLimits;
  priceVar: PriceVar;
}[] = [
  {
    id: "starter",
    name: "Starter",
    currency: "usd",
    limits: { agentThreads: 1, ramMb: 2048, gatewaySeats: 0 },
    priceVar: "STRIPE_PRICE_API_STARTER",
  },
  {
    id: "pro",
    name: "Pro",
    currency: "usd",
    limits: { agentThreads: 3, ramMb: 4096, gatewaySeats: 1 },
    priceVar: "STRIPE_PRICE_API_PRO",
  },
  {
    id: "scale",
    name: "Scale",
    currency: "usd",
    limits: { agentThreads: 100, ramMb: 16384, gatewaySeats: null },
    priceVar: "STRIPE_PRICE_API_SCALE",
  },
];

/** Credit packs: 1 credit = 1 USD (the credit ledger's unit). */
export const creditPackIds = ["50", "200", "500"] as const;
export type CreditPackId = (typeof creditPackIds)[number];
export const creditPacks: readonly {
  id: CreditPackId;
  credits: number;
  priceCents: number;
  currency: "usd";
  priceVar: PriceVar;
}[] = [
  { id: "50", credits: 5, priceCents: 500, currency: "usd", priceVar: "STRIPE_PRICE_CREDITS_50" },
  {
    id: "200",
    credits: 15,
    priceCents: 1500,
    currency: "usd",
    priceVar: "STRIPE_PRICE_CREDITS_200",
  },
  {
    id: "500",
    credits: 30,
    priceCents: 3000,
    currency: "usd",
    priceVar: "STRIPE_PRICE_CREDITS_500",
  },
];

/** The storage upgrade: +50 GB for each completed checkout. */
export const STORAGE_UPGRADE_GB = 50;

export const FREE_LIMITS: PlanLimits = { agentThreads: 0, ramMb: 0, gatewaySeats: 0 };

/** The runtime's limits for a plan id (a user's `plan` column); unknown or free: nothing. */
export function planLimits(plan: string): PlanLimits {
  const found =
    plans.find((p) => p.id === plan)?.limits ??
    apiPlans.find((p) => p.id === plan)?.limits ??
    (plan === enterpriseSuite.id ? enterpriseSuite.limits : undefined);
  return found ?? FREE_LIMITS;
}

/** Rank of a plan, to pick the user's effective plan among several subscriptions. */
export function planRank(plan: string): number {
  const limits = planLimits(plan);
  return limits.agentThreads === null ? 1_000_000 + limits.ramMb : limits.agentThreads;
}

export const priceIdOf = (priceVar: PriceVar): string | undefined => env()[priceVar];

export type ItemKind = "plan" | "addon" | "suite" | "api" | "credits" | "storage";

export interface CatalogItem {
  kind: ItemKind;
  id: string;
  priceVar: PriceVar;
}

function allItems(): CatalogItem[] {
  return [
    ...plans.map((p) => ({ kind: "plan" as const, id: p.id, priceVar: p.priceVar })),
    ...addOns.map((a) => ({ kind: "addon" as const, id: a.id, priceVar: a.priceVar })),
    { kind: "suite", id: enterpriseSuite.id, priceVar: enterpriseSuite.priceVar },
    ...apiPlans.map((p) => ({ kind: "api" as const, id: p.id, priceVar: p.priceVar })),
    ...creditPacks.map((c) => ({ kind: "credits" as const, id: c.id, priceVar: c.priceVar })),
    { kind: "storage", id: "storage-50gb", priceVar: "STRIPE_PRICE_STORAGE_50GB" },
  ];
}

/** The catalog item a Stripe price id is configured for. */
export function itemByPriceId(priceId: string): CatalogItem | undefined {
  return allItems().find((item) => priceIdOf(item.priceVar) === priceId);
}

export function findItem(kind: ItemKind, id: string): CatalogItem | undefined {
  return allItems().find((item) => item.kind === kind && item.id === id);
}

/** The credit prices GET /api/pay/credits accepts (configured credit-pack prices only). */
export function allowedCreditPrices(): string[] {
  return creditPacks.map((c) => priceIdOf(c.priceVar)).filter((p): p is string => Boolean(p));
}
