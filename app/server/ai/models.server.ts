import { DomainError } from "../platform/errors.server.ts";
import { type CatalogModel, loadCatalog, resolveModel } from "./catalog.server.ts";
import { estimateUsd, priceToUsdPerToken } from "./money.server.ts";
import { isProviderName, type ProviderName, providerNames } from "./providers/shared.server.ts";
import { configuredProvider } from "./providers.server.ts";
import { selectModel, type TaskType } from "./selection.server.ts";

// The catalog as the AI-layer endpoints show it.

export interface FrontendModel {
  id: string;
  name: string;
  contextLength: number;
  pricing: { prompt: number; completion: number };
  featured: boolean;
  description: string;
}

export const pricingOf = (m: CatalogModel) => ({
  prompt: priceToUsdPerToken(m.prices.prompt),
  completion: priceToUsdPerToken(m.prices.completion),
});

/** GET /api/models: one entry per model family (the vendor's own offer first). */
export async function frontendModels(): Promise<FrontendModel[]> {
  const catalog = await loadCatalog();
  if (catalog.models.length === 0 && catalog.failures.length > 0) {
    const detail = catalog.failures.map((f) => `${f.provider}: ${f.error}`).join("; ");
    throw new DomainError(500, `Model listing failed (${detail})`);
  }
  const vendor = (m: CatalogModel) => m.id.slice(0, m.id.indexOf("/"));
  const byFamily = new Map<string, CatalogModel>();
  for (const m of catalog.models) {
    const seen = byFamily.get(m.family);
    if (!seen || (seen.provider !== vendor(seen) && m.provider === vendor(m))) {
      byFamily.set(m.family, m);
    }
  }
  return [...byFamily.values()]
    .sort((a, b) => Number(b.featured) - Number(a.featured) || a.id.localeCompare(b.id))
    .map((m) => ({
      id: m.id,
      name: m.name,
      contextLength: m.contextLength,
      pricing: pricingOf(m),
      featured: m.featured,
      description: m.description,
    }));
}

/** GET /api/ai/models: every (model, provider) pair with per-provider counts. */
export async function unifiedModels() {
  const { models } = await loadCatalog();
  const counts = Object.fromEntries(providerNames.map((p) => [p, 0])) as Record<
    ProviderName,
    number
  >;
  for (const m of models) counts[m.provider] += 1;
  return {
    models: models.map((m) => ({ id: m.id, provider: m.provider })),
    count: models.length,
    ...counts,
  };
}

/** GET /api/ai/models/:provider */
export async function providerModels(provider: string) {
  if (!isProviderName(provider)) {
    throw new DomainError(404, `Unknown provider ${provider}; known: ${providerNames.join(", ")}`);
  }
  if (!configuredProvider(provider)) {
    throw new DomainError(404, `Provider ${provider} is not configured`);
  }
  const { models } = await loadCatalog();
  const own = models.filter((m) => m.provider === provider);
  return {
    provider,
    models: own.map((m) => ({ id: m.id, provider: m.provider })),
    count: own.length,
  };
}

/** POST /api/ai/models/select */
export async function selectForTask(taskType: TaskType) {
  const { models } = await loadCatalog();
  if (models.length === 0) throw new DomainError(404, "No models available");
  const picked = selectModel(models, taskType);
  if (!picked) throw new DomainError(404, `No model available for taskType ${taskType}`);
  return { id: picked.id, provider: picked.provider };
}

/** POST /api/ai/estimate-cost: USD at the price of the provider that would serve first. */
export async function estimateCost(model: string, inputTokens: number, outputTokens: number) {
  const catalog = await loadCatalog();
  const [first] = resolveModel(catalog, model);
  if (!first) throw new DomainError(404, `Model ${model} not found`);
  return estimateUsd(first.prices, inputTokens, outputTokens);
}
