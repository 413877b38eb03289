import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { logger } from "../platform/logger.server.ts";
import { type Prices, usdPerMillionToPrice } from "./money.server.ts";
import { type PriceTableEntry, priceTable } from "./price-table.server.ts";
import type { ListedModel, ProviderConfig, ProviderName } from "./providers/shared.server.ts";
import { clients, configuredProviders } from "./providers.server.ts";

// The model catalog: what each configured provider offers, with context length and prices,
// cached in ai_models. The refresh-model-catalog job lists every provider periodically; a
// provider never listed yet is listed on first read. When a listing fails, the rows of the last
// good listing stay; with none, the checked-in price table stands in (source 'fallback').

export interface CatalogModel {
  provider: ProviderName;
  /** The provider's own id, sent to it. */
  modelId: string;
  /** `<vendor>/<model>` */
  id: string;
  /** `<vendor>/<normalised model>`: the same model at different providers shares it. */
  family: string;
  name: string;
  description: string;
  contextLength: number;
  prices: Prices;
  capabilities: string[];
  featured: boolean;
  source: "listing" | "fallback";
}

export interface Catalog {
  models: CatalogModel[];
  /** Providers whose listing failed and that have nothing to offer. */
  failures: Array<{ provider: ProviderName; error: string }>;
}

const LISTING_TIMEOUT_MS = 15_000;
/** A provider whose first listing failed is retried inline no sooner than this. */
const INLINE_RETRY_MS = 60_000;

/** "claude-3.5-haiku", "claude-3-5-haiku-20241022" and "claude-3-5-haiku-latest" are one model. */
export function normaliseModel(model: string): string {
  return model
    .toLowerCase()
    .replace(/^models\//, "")
    .replace(/-(latest|\d{8})$/, "")
    .replace(/\./g, "-");
}

export function familyOf(id: string): string {
  const slash = id.indexOf("/");
  return slash < 0
    ? normaliseModel(id)
    : `${id.slice(0, slash)}/${normaliseModel(id.slice(slash + 1))}`;
}

const tableByFamily = new Map<string, PriceTableEntry>(
  priceTable.map((e) => [familyOf(`${e.provider}/${e.modelId}`), e]),
);

/** Capabilities guessed from a model's name when the price table does not know it. */
function guessCapabilities(id: string): string[] {
  const caps: string[] = [];
  if (/coder|codestral|devstral|code/i.test(id)) caps.push("coding");
  if (/(^|[/-])(o1|o3|o4)|r1|reason|think/i.test(id)) caps.push("reasoning");
  if (/mini|flash|haiku|lite|nano|small|\b\d+b\b|-8b|-7b|-3b/i.test(id)) caps.push("fast");
  if (/vision|vl\b|-vl-/i.test(id)) caps.push("vision");
  return caps;
}

function fromTable(entry: PriceTableEntry, source: CatalogModel["source"]): CatalogModel {
  const id = `${entry.provider}/${entry.modelId}`;
  return {
    provider: entry.provider,
    modelId: entry.modelId,
    id,
    family: familyOf(id),
    name: entry.name,
    description: entry.description,
    contextLength: entry.contextLength,
    prices: {
      prompt: usdPerMillionToPrice(entry.prompt),
      completion: usdPerMillionToPrice(entry.completion),
    },
    capabilities: entry.capabilities,
    featured: entry.featured ?? false,
    source,
  };
}

/** Combines a listed model with the price table; undefined when it cannot be priced. */
export function toCatalogModel(
  config: ProviderConfig,
  listed: ListedModel,
): CatalogModel | undefined {
  const vendorOwn = config.name === "openrouter" ? undefined : config.name;
  const id = vendorOwn ? `${vendorOwn}/${listed.modelId}` : listed.modelId;
  const known = tableByFamily.get(familyOf(id));
  let prices = listed.pricing;
  if (!prices && known) {
    prices = {
      prompt: usdPerMillionToPrice(known.prompt),
      completion: usdPerMillionToPrice(known.completion),
    };
  }
  // A custom base URL without a key is a local server (Ollama, llama.cpp, vLLM…): its models
  // cost nothing per token whatever they are called (decision 0157). With a key it may front
  // the vendor, so a model the table knows is priced as the vendor's and only unknown ones are
  // free. An unpriced model at a paid vendor cannot be billed, so it is not offered.
  const local = config.custom && !known;
  if (config.custom && !config.apiKey) prices = { prompt: 0n, completion: 0n };
  if (!prices && local) prices = { prompt: 0n, completion: 0n };
  if (!prices) return undefined;
  const fullId = local && vendorOwn ? `local/${listed.modelId}` : id;
  const capabilities = new Set([
    ...(known?.capabilities ?? guessCapabilities(fullId)),
    ...(listed.capabilities ?? []),
  ]);
  return {
    provider: config.name,
    modelId: listed.modelId,
    id: fullId,
    family: familyOf(fullId),
    name: listed.name ?? known?.name ?? listed.modelId,
    description: listed.description ?? known?.description ?? "",
    contextLength: listed.contextLength ?? known?.contextLength ?? 0,
    prices,
    capabilities: [...capabilities],
    featured: known?.featured ?? false,
    source: "listing",
  };
}

async function store(provider: ProviderName, models: CatalogModel[], error: string | null) {
  const rows = models.map((m) => ({
    provider: m.provider,
    model_id: m.modelId,
    id: m.id,
    family: m.family,
    name: m.name,
    description: m.description,
    context_length: m.contextLength,
    prompt_price: m.prices.prompt.toString(),
    completion_price: m.prices.completion.toString(),
    capabilities: m.capabilities,
    featured: m.featured,
    source: m.source,
  }));
  await db().begin(async (tx) => {
    await tx`delete from ai_models where provider = ${provider}`;
    // Insert in slices: a big aggregator listing would exceed the parameter limit otherwise.
    for (let i = 0; i < rows.length; i += 500) {
      await tx`insert into ai_models ${tx(rows.slice(i, i + 500))}
        on conflict (provider, model_id) do nothing`;
    }
    await tx`insert into ai_catalog_refreshes
        (provider, attempted_at, succeeded_at, source, model_count, error)
      values (${provider}, now(), now(), ${models[0]?.source ?? "listing"}, ${models.length}, ${error})
      on conflict (provider) do update set attempted_at = now(), succeeded_at = now(),
        source = excluded.source, model_count = excluded.model_count, error = excluded.error`;
  });
}

export interface RefreshResult {
  provider: ProviderName;
  ok: boolean;
  source: "listing" | "fallback" | "cache" | "none";
  count: number;
  error?: string;
}

/** Lists one provider and replaces its cached models; on failure keeps or falls back. */
export async function refreshProvider(config: ProviderConfig): Promise<RefreshResult> {
  const provider = config.name;
  try {
    const listed = await clients[provider].listModels(
      config,
      AbortSignal.timeout(LISTING_TIMEOUT_MS),
    );
    const models: CatalogModel[] = [];
    const seen = new Set<string>();
    for (const entry of listed) {
      const model = toCatalogModel(config, entry);
      if (model && !seen.has(model.modelId)) {
        seen.add(model.modelId);
        models.push(model);
      }
    }
    await store(provider, models, null);
    return { provider, ok: true, source: "listing", count: models.length };
  } catch (err) {
    const error = (err as Error).message;
    logger().warn({ provider, err: error }, "model listing failed");
    const [cached] = await db()<{ n: number }[]>`
      select count(*)::int as n from ai_models where provider = ${provider}`;
    if (cached && cached.n > 0) {
      await db()`update ai_catalog_refreshes set attempted_at = now(), error = ${error}
        where provider = ${provider}`;
      return { provider, ok: false, source: "cache", count: cached.n, error };
    }
    const fallback = priceTable.filter((e) => e.provider === provider);
    if (fallback.length > 0) {
      await store(
        provider,
        fallback.map((e) => fromTable(e, "fallback")),
        error,
      );
      return { provider, ok: false, source: "fallback", count: fallback.length, error };
    }
    await db()`insert into ai_catalog_refreshes (provider, attempted_at, model_count, error)
      values (${provider}, now(), 0, ${error})
      on conflict (provider) do update set attempted_at = now(), error = excluded.error`;
    return { provider, ok: false, source: "none", count: 0, error };
  }
}

/** Refreshes every configured provider (the periodic job). */
export async function refreshCatalog(): Promise<RefreshResult[]> {
  const results = await Promise.all(configuredProviders().map(refreshProvider));
  resetCatalogCache();
  return results;
}

let cache: { key: string; at: number; catalog: Catalog } | undefined;
const inflight = new Map<ProviderName, Promise<RefreshResult>>();

interface ModelRow {
  provider: ProviderName;
  model_id: string;
  id: string;
  family: string;
  name: string;
  description: string;
  context_length: number;
  prompt_price: number;
  completion_price: number;
  capabilities: string[];
  featured: boolean;
  source: "listing" | "fallback";
}

const providerRank = (p: ProviderName) =>
  ["openai", "anthropic", "google", "openrouter"].indexOf(p);

async function read(configs: ProviderConfig[]): Promise<Catalog> {
  const names = configs.map((c) => c.name);
  if (names.length === 0) return { models: [], failures: [] };
  let refreshes = await db()<
    { provider: ProviderName; attempted_at: Date; model_count: number; error: string | null }[]
  >`select provider, attempted_at, model_count, error from ai_catalog_refreshes
    where provider in ${db()(names)}`;
  // Never listed (or listed with nothing, a while ago): list now, once per process at a time.
  const due = configs.filter((c) => {
    const r = refreshes.find((x) => x.provider === c.name);
    return !r || (r.model_count === 0 && Date.now() - r.attempted_at.getTime() > INLINE_RETRY_MS);
  });
  if (due.length > 0) {
    await Promise.all(
      due.map((c) => {
        let p = inflight.get(c.name);
        if (!p) {
          p = refreshProvider(c).finally(() => inflight.delete(c.name));
          inflight.set(c.name, p);
        }
        return p;
      }),
    );
    refreshes = await db()`select provider, attempted_at, model_count, error
      from ai_catalog_refreshes where provider in ${db()(names)}`;
  }
  const rows = await db()<ModelRow[]>`select * from ai_models
    where provider in ${db()(names)} order by featured desc, id`;
  const models = rows
    .map(
      (r): CatalogModel => ({
        provider: r.provider,
        modelId: r.model_id,
        id: r.id,
        family: r.family,
        name: r.name,
        description: r.description,
        contextLength: r.context_length,
        prices: { prompt: BigInt(r.prompt_price), completion: BigInt(r.completion_price) },
        capabilities: r.capabilities,
        featured: r.featured,
        source: r.source,
      }),
    )
    .sort((a, b) => providerRank(a.provider) - providerRank(b.provider));
  const failures = refreshes
    .filter((r) => r.error && r.model_count === 0)
    .map((r) => ({ provider: r.provider, error: r.error ?? "listing failed" }));
  return { models, failures };
}

/** The catalog of the configured providers (kept in memory for AI_CATALOG_CACHE_SECONDS). */
export async function loadCatalog(): Promise<Catalog> {
  const configs = configuredProviders();
  const key = configs.map((c) => `${c.name}@${c.baseUrl}`).join(",");
  const ttl = env().AI_CATALOG_CACHE_SECONDS * 1000;
  if (cache && cache.key === key && Date.now() - cache.at < ttl) return cache.catalog;
  const catalog = await read(configs);
  cache = { key, at: Date.now(), catalog };
  return catalog;
}

export function resetCatalogCache(): void {
  cache = undefined;
}

/**
 * Every catalog entry that serves `requested` — a `<vendor>/<model>` id, a provider's own model
 * id, or any spelling of the same family — the vendor's own provider first, then the others.
 */
export function resolveModel(catalog: Catalog, requested: string): CatalogModel[] {
  const wanted = requested.trim();
  const family = familyOf(wanted);
  const bare = normaliseModel(wanted);
  const matches = catalog.models.filter(
    (m) =>
      m.id === wanted ||
      m.family === family ||
      m.modelId === wanted ||
      (!wanted.includes("/") && normaliseModel(m.id.slice(m.id.indexOf("/") + 1)) === bare),
  );
  const vendor = (m: CatalogModel) => m.id.slice(0, m.id.indexOf("/"));
  const seen = new Set<ProviderName>();
  return matches
    .sort(
      (a, b) =>
        Number(b.provider === vendor(b)) - Number(a.provider === vendor(a)) ||
        providerRank(a.provider) - providerRank(b.provider),
    )
    .filter((m) => {
      if (seen.has(m.provider)) return false;
      seen.add(m.provider);
      return true;
    });
}
