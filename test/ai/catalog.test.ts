import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as estimateRoute from "../../app/routes/api.ai.estimate-cost.ts";
import * as providerRoute from "../../app/routes/api.ai.models.$provider.ts";
import * as selectRoute from "../../app/routes/api.ai.models.select.ts";
import * as aiModelsRoute from "../../app/routes/api.ai.models.ts";
import * as modelsRoute from "../../app/routes/api.models.ts";
import { loadCatalog, resolveModel } from "../../app/server/ai/catalog.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { getBoss } from "../../app/server/platform/jobs.server.ts";
import { refreshModelCatalog } from "../../worker/jobs/refresh-model-catalog.ts";
import { startWorker, stopWorker } from "../../worker/jobs/worker.ts";
import { call } from "../helpers/api.ts";
import { createAnthropicFake } from "../msw/handlers/anthropic.ts";
import { createGoogleFake } from "../msw/handlers/google.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { createOpenRouterFake } from "../msw/handlers/openrouter.ts";
import { mswServer } from "../msw/server.ts";
import { allProviders, configureAi } from "./support.ts";

const openai = createOpenAiFake();
const anthropic = createAnthropicFake();
const google = createGoogleFake();
const openrouter = createOpenRouterFake();
const LOCAL = "http://127.0.0.2:11434/v1";
const local = createOpenAiFake(LOCAL, { apiKey: "", models: ["llama3.2:3b", "qwen2.5-coder:7b"] });

beforeAll(() => {
  mswServer.use(
    ...openai.handlers,
    ...anthropic.handlers,
    ...google.handlers,
    ...openrouter.handlers,
    ...local.handlers,
  );
});

beforeEach(async () => {
  for (const fake of [openai, anthropic, google, openrouter, local]) fake.state.listing = "ok";
  await configureAi(allProviders);
});

const post = (module: typeof selectRoute, path: string, body?: unknown) =>
  call(module, path, { method: "POST", body });

describe("the model catalog", () => {
  it("lists every configured provider on first read and caches it in the database", async () => {
    const catalog = await loadCatalog();
    const providers = new Set(catalog.models.map((m) => m.provider));
    expect([...providers].sort()).toEqual(["anthropic", "google", "openai", "openrouter"]);
    // OpenAI's listing has no prices: the price table prices it, and drops what it cannot price.
    const gpt = catalog.models.find((m) => m.provider === "openai" && m.modelId === "gpt-4o");
    expect(gpt).toMatchObject({ id: "openai/gpt-4o", contextLength: 128_000, source: "listing" });
    expect(gpt?.prices).toEqual({ prompt: 2_500_000n, completion: 10_000_000n });
    expect(catalog.models.map((m) => m.modelId)).not.toContain("text-embedding-3-small");
    const [rows] = await db()<{ n: number }[]>`select count(*)::int as n from ai_models`;
    expect(rows?.n).toBe(catalog.models.length);
  });

  it("falls back to the checked-in price table when a listing is unreachable", async () => {
    anthropic.state.listing = "network";
    const catalog = await loadCatalog();
    const claude = catalog.models.filter((m) => m.provider === "anthropic");
    expect(claude.length).toBeGreaterThan(0);
    expect(claude.every((m) => m.source === "fallback")).toBe(true);
    const [refresh] = await db()`select * from ai_catalog_refreshes where provider = 'anthropic'`;
    expect(refresh?.source).toBe("fallback");
    expect(refresh?.error).toMatch(/anthropic/);
  });

  it("keeps the last good listing when a later refresh fails", async () => {
    await loadCatalog();
    openrouter.state.listing = 502;
    const results = await refreshModelCatalog();
    expect(results.providers.find((r) => r.provider === "openrouter")).toMatchObject({
      ok: false,
      source: "cache",
    });
    const after = await loadCatalog();
    expect(after.models.some((m) => m.id === "deepseek/deepseek-r1")).toBe(true);
  });

  it("serves a local OpenAI-compatible server's models for free under local/", async () => {
    await configureAi({ OPENAI_BASE_URL: LOCAL });
    const catalog = await loadCatalog();
    expect(catalog.models.map((m) => m.id)).toEqual([
      "local/llama3.2:3b",
      "local/qwen2.5-coder:7b",
    ]);
    expect(catalog.models[0]?.prices).toEqual({ prompt: 0n, completion: 0n });
    expect(catalog.models[1]?.capabilities).toContain("coding");
  });

  it("prices nothing at a keyless local server, even models under a vendor's name", async () => {
    const models = local.state.models;
    local.state.models = ["gpt-4o-mini", "llama3.2:3b"];
    try {
      await configureAi({ OPENAI_BASE_URL: LOCAL });
      const catalog = await loadCatalog();
      expect(catalog.models.map((m) => [m.id, m.prices])).toEqual([
        ["openai/gpt-4o-mini", { prompt: 0n, completion: 0n }],
        ["local/llama3.2:3b", { prompt: 0n, completion: 0n }],
      ]);
      // With a key the same URL may front the vendor: a known model is priced as the vendor's.
      await configureAi({ OPENAI_BASE_URL: LOCAL, OPENAI_API_KEY: "proxy-key" });
      local.state.apiKey = "proxy-key";
      const priced = await loadCatalog();
      expect(
        priced.models.find((m) => m.id === "openai/gpt-4o-mini")?.prices.prompt,
      ).toBeGreaterThan(0n);
    } finally {
      local.state.models = models;
      local.state.apiKey = "";
    }
  });

  it("resolves any spelling of a model to every provider serving it, vendor first", async () => {
    const catalog = await loadCatalog();
    const ids = (q: string) => resolveModel(catalog, q).map((m) => `${m.provider}:${m.modelId}`);
    expect(ids("openai/gpt-4o")).toEqual(["openai:gpt-4o", "openrouter:openai/gpt-4o"]);
    expect(ids("gpt-4o")).toEqual(["openai:gpt-4o", "openrouter:openai/gpt-4o"]);
    expect(ids("anthropic/claude-sonnet-4")).toEqual([
      "anthropic:claude-sonnet-4-20250514",
      "openrouter:anthropic/claude-sonnet-4",
    ]);
    expect(ids("nope/nothing")).toEqual([]);
  });
});

describe("the refresh-model-catalog job", () => {
  it("is scheduled by the worker and refreshes the catalog when run", async () => {
    await startWorker({ concurrency: 1 });
    try {
      const boss = await getBoss();
      const schedules = await boss.getSchedules();
      expect(schedules.map((s) => s.name)).toContain("refresh-model-catalog");
      const id = await boss.send("refresh-model-catalog", {});
      await expect
        .poll(async () => (await boss.findJobs("refresh-model-catalog", { id: id! }))[0]?.state, {
          timeout: 20_000,
        })
        .toBe("completed");
      const refreshed = await db()`select provider from ai_catalog_refreshes order by provider`;
      expect(refreshed.map((r) => r.provider)).toEqual([
        "anthropic",
        "google",
        "openai",
        "openrouter",
      ]);
    } finally {
      await stopWorker(5_000);
    }
  });
});

describe("GET /api/models", () => {
  it("lists one entry per model with <vendor>/<model> ids and USD prices per token", async () => {
    const res = await call(modelsRoute, "/api/models");
    expect(res.status).toBe(200);
    const gpt = res.json.models.find((m: { id: string }) => m.id === "openai/gpt-4o");
    expect(gpt).toEqual({
      id: "openai/gpt-4o",
      name: "GPT-4o",
      contextLength: 128_000,
      pricing: { prompt: 0.0000025, completion: 0.00001 },
      featured: true,
      description: "OpenAI's versatile multimodal flagship model.",
    });
    // The same model through OpenRouter does not appear twice.
    expect(res.json.models.filter((m: { id: string }) => m.id === "openai/gpt-4o")).toHaveLength(1);
    const llama = res.json.models.find(
      (m: { id: string }) => m.id === "meta-llama/llama-3.3-70b-instruct",
    );
    expect(llama.pricing).toEqual({ prompt: 0.000000038, completion: 0.00000012 });
    for (const m of res.json.models) expect(m.id).toMatch(/^[^/]+\/.+/);
  });

  it("answers 500 when the listing is invalid and nothing else can be offered", async () => {
    await configureAi({ OPENROUTER_API_KEY: "test-key" });
    openrouter.state.listing = "invalid";
    const res = await call(modelsRoute, "/api/models");
    expect(res.status).toBe(500);
    expect(res.json.error).toMatch(/Model listing failed.*openrouter/);
  });

  it("answers 500 when the listing is unreachable", async () => {
    await configureAi({ OPENROUTER_API_KEY: "test-key" });
    openrouter.state.listing = "network";
    const res = await call(modelsRoute, "/api/models");
    expect(res.status).toBe(500);
  });
});

describe("GET /api/ai/models and /api/ai/models/:provider", () => {
  it("lists every (model, provider) pair with per-provider counts", async () => {
    const res = await call(aiModelsRoute, "/api/ai/models");
    expect(res.status).toBe(200);
    expect(res.json.count).toBe(res.json.models.length);
    expect(res.json.openai + res.json.anthropic + res.json.google + res.json.openrouter).toBe(
      res.json.count,
    );
    expect(res.json.openrouter).toBe(5);
    expect(res.json.models).toContainEqual({ id: "openai/gpt-4o", provider: "openrouter" });
    expect(Date.parse(res.json.timestamp)).not.toBeNaN();
  });

  it("lists one provider's models", async () => {
    const res = await call(providerRoute, "/api/ai/models/google", {
      params: { provider: "google" },
    });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ provider: "google", count: 2 });
    expect(res.json.models).toContainEqual({ id: "google/gemini-2.5-flash", provider: "google" });
  });

  it("answers 400 for a malformed provider and 404 for an unknown or unconfigured one", async () => {
    const bad = await call(providerRoute, "/x", { params: { provider: "Open AI!" } });
    expect(bad.status).toBe(400);
    const unknown = await call(providerRoute, "/x", { params: { provider: "mistral" } });
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toMatch(/Unknown provider mistral/);
    await configureAi({ OPENAI_API_KEY: "test-key" });
    const off = await call(providerRoute, "/x", { params: { provider: "anthropic" } });
    expect(off.status).toBe(404);
    expect(off.json.error).toMatch(/not configured/);
  });
});

describe("POST /api/ai/models/select", () => {
  const pick = async (taskType?: string) => {
    const res = await post(
      selectRoute,
      "/api/ai/models/select",
      taskType ? { taskType } : undefined,
    );
    return res;
  };

  it("picks a model that fits each task type", async () => {
    const catalog = await loadCatalog();
    const byId = (id: string, provider: string) =>
      catalog.models.find((m) => m.id === id && m.provider === provider)!;
    const general = await pick();
    expect(general.status).toBe(200);
    expect(general.json.taskType).toBe("general");
    expect(byId(general.json.model.id, general.json.model.provider).featured).toBe(true);

    for (const cap of ["coding", "reasoning", "vision", "fast"]) {
      const res = await pick(cap);
      expect(res.status).toBe(200);
      expect(byId(res.json.model.id, res.json.model.provider).capabilities).toContain(cap);
    }
    const cheap = await pick("cheap");
    const cheapest = Math.min(
      ...catalog.models.map((m) => Number(m.prices.prompt + m.prices.completion)),
    );
    const chosen = byId(cheap.json.model.id, cheap.json.model.provider);
    expect(Number(chosen.prices.prompt + chosen.prices.completion)).toBe(cheapest);
    expect(cheap.json.model.id).toBe("meta-llama/llama-3.3-70b-instruct");

    const long = await pick("long-context");
    const longest = Math.max(...catalog.models.map((m) => m.contextLength));
    expect(byId(long.json.model.id, long.json.model.provider).contextLength).toBe(longest);
  });

  it("answers 400 for an unknown task type and 404 when there are no models", async () => {
    expect((await pick("poetry")).status).toBe(400);
    await configureAi({});
    const none = await pick("general");
    expect(none.status).toBe(404);
    expect(none.json).toEqual({ error: "No models available" });
  });

  it("answers 404 for vision when no model can see", async () => {
    await configureAi({ OPENAI_BASE_URL: LOCAL });
    const res = await pick("vision");
    expect(res.status).toBe(404);
  });
});

describe("POST /api/ai/estimate-cost", () => {
  it("estimates in USD with per-token prices", async () => {
    const res = await post(estimateRoute as never, "/api/ai/estimate-cost", {
      model: "openai/gpt-4o",
      inputTokens: 1234,
      outputTokens: 567,
    });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      model: "openai/gpt-4o",
      inputTokens: 1234,
      outputTokens: 567,
      estimatedCost: 0.008755,
      currency: "USD",
    });
    const million = await post(estimateRoute as never, "/x", {
      model: "gpt-4o",
      inputTokens: 1_000_000,
      outputTokens: 0,
    });
    expect(million.json.estimatedCost).toBe(2.5);
    const openRouterOnly = await post(estimateRoute as never, "/x", {
      model: "deepseek/deepseek-r1",
      inputTokens: 1000,
      outputTokens: 1000,
    });
    // 1000 × 0.0000004 + 1000 × 0.000002
    expect(openRouterOnly.json.estimatedCost).toBe(0.0024);
  });

  it.each([
    [{ inputTokens: 1, outputTokens: 1 }],
    [{ model: "openai/gpt-4o", outputTokens: 1 }],
    [{ model: "openai/gpt-4o", inputTokens: 1 }],
    [{ model: "openai/gpt-4o", inputTokens: -1, outputTokens: 1 }],
    [{ model: "openai/gpt-4o", inputTokens: "10", outputTokens: 1 }],
    [{ model: "", inputTokens: 1, outputTokens: 1 }],
  ])("answers 400 for %j", async (body) => {
    const res = await post(estimateRoute as never, "/x", body);
    expect(res.status).toBe(400);
    expect(typeof res.json.error).toBe("string");
  });

  it("answers 400 without a body and 404 for an unknown model", async () => {
    expect((await post(estimateRoute as never, "/x")).status).toBe(400);
    const res = await post(estimateRoute as never, "/x", {
      model: "acme/unknown-1",
      inputTokens: 1,
      outputTokens: 1,
    });
    expect(res.status).toBe(404);
    expect(res.json).toEqual({ error: "Model acme/unknown-1 not found" });
  });
});
