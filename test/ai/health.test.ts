import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as healthRoute from "../../app/routes/api.ai.health.ts";
import { call } from "../helpers/api.ts";
import { createAnthropicFake } from "../msw/handlers/anthropic.ts";
import { createGoogleFake } from "../msw/handlers/google.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { createOpenRouterFake } from "../msw/handlers/openrouter.ts";
import { mswServer } from "../msw/server.ts";
import { allProviders, configureAi } from "./support.ts";

const fakes = {
  openai: createOpenAiFake(),
  anthropic: createAnthropicFake(),
  google: createGoogleFake(),
  openrouter: createOpenRouterFake(),
};

beforeAll(() => {
  mswServer.use(...Object.values(fakes).flatMap((f) => f.handlers));
});

beforeEach(async () => {
  for (const f of Object.values(fakes)) f.state.listing = "ok";
  await configureAi(allProviders, { clearDb: false });
});

describe("GET /api/ai/health", () => {
  it("is healthy when every configured provider answers", async () => {
    const res = await call(healthRoute, "/api/ai/health");
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      status: "healthy",
      providers: { openai: true, anthropic: true, google: true, openrouter: true },
    });
    expect(Date.parse(res.json.timestamp)).not.toBeNaN();
  });

  it("is degraded when some are down", async () => {
    fakes.anthropic.state.listing = 503;
    fakes.google.state.listing = "network";
    const res = await call(healthRoute, "/api/ai/health");
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      status: "degraded",
      providers: { openai: true, anthropic: false, google: false, openrouter: true },
    });
  });

  it("answers 503 when none answers, and when none is configured", async () => {
    for (const f of Object.values(fakes)) f.state.listing = 500;
    const res = await call(healthRoute, "/api/ai/health");
    expect(res.status).toBe(503);
    expect(res.json).toMatchObject({ error: "No AI provider is reachable", status: "unavailable" });
    await configureAi({}, { clearDb: false });
    const none = await call(healthRoute, "/api/ai/health");
    expect(none.status).toBe(503);
    expect(none.json.providers).toEqual({});
  });

  it("reports a provider whose key is refused as down", async () => {
    await configureAi({ OPENAI_API_KEY: "wrong", OPENROUTER_API_KEY: "x" }, { clearDb: false });
    const res = await call(healthRoute, "/api/ai/health");
    expect(res.json).toMatchObject({
      status: "degraded",
      providers: { openai: false, openrouter: true },
    });
  });
});
