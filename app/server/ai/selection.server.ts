import type { CatalogModel } from "./catalog.server.ts";
import { isCoolingDown } from "./cooldown.server.ts";

// taskType → the model that fits it best among the catalog's models:
// - coding, reasoning, vision: models with that capability (price table or listing), featured
//   first, then the most capable (priciest); coding and reasoning fall back to the priciest
//   model, vision has no fallback (a text-only model does not fit).
// - fast: models marked fast, cheapest first. cheap: the lowest prompt+completion price.
// - long-context: the largest context window. general: the first featured model.
// Providers cooling down are avoided while another serves.

export const taskTypes = [
  "general",
  "coding",
  "reasoning",
  "vision",
  "fast",
  "cheap",
  "long-context",
] as const;
export type TaskType = (typeof taskTypes)[number];

const price = (m: CatalogModel) => m.prices.prompt + m.prices.completion;
const cmp = (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0);
const byFeaturedThenPriciest = (a: CatalogModel, b: CatalogModel) =>
  Number(b.featured) - Number(a.featured) || cmp(price(b), price(a));
const cheapest = (a: CatalogModel, b: CatalogModel) =>
  cmp(price(a), price(b)) || b.contextLength - a.contextLength;

export function selectModel(models: CatalogModel[], taskType: TaskType): CatalogModel | undefined {
  const healthy = models.filter((m) => !isCoolingDown(m.provider));
  const pool = healthy.length > 0 ? healthy : models;
  if (pool.length === 0) return undefined;
  const withCap = (cap: string) => pool.filter((m) => m.capabilities.includes(cap));
  switch (taskType) {
    case "coding":
    case "reasoning": {
      const fits = withCap(taskType);
      return [...(fits.length ? fits : pool)].sort(byFeaturedThenPriciest)[0];
    }
    case "vision":
      return withCap("vision").sort(byFeaturedThenPriciest)[0];
    case "fast": {
      const fits = withCap("fast");
      return [...(fits.length ? fits : pool)].sort(cheapest)[0];
    }
    case "cheap":
      return [...pool].sort(cheapest)[0];
    case "long-context":
      return [...pool].sort((a, b) => b.contextLength - a.contextLength || cheapest(a, b))[0];
    case "general":
      return pool.find((m) => m.featured) ?? pool[0];
  }
}
