import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import { loader } from "../../app/routes/models.tsx";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { createOpenRouterFake } from "../msw/handlers/openrouter.ts";
import { mswServer } from "../msw/server.ts";
import { configureAi } from "./support.ts";

const openai = createOpenAiFake();
const openrouter = createOpenRouterFake();

beforeAll(() => {
  mswServer.use(...openai.handlers, ...openrouter.handlers);
});

beforeEach(async () => {
  openrouter.state.listing = "ok";
  await configureAi({ OPENAI_API_KEY: "test-key", OPENROUTER_API_KEY: "test-key" });
});

const load = (query = "") =>
  loader({ request: new Request(`http://localhost/models${query}`), params: {}, context: {} });

describe("the models page", () => {
  it("lists the catalog with prices", async () => {
    const data = await load();
    expect(data.error).toBeUndefined();
    expect(data.total).toBe(data.models.length);
    expect(data.models.find((m) => m.id === "openai/gpt-4o")?.pricing.prompt).toBe(0.0000025);
  });

  it("searches by name, id or description", async () => {
    const data = await load("?q=llama");
    expect(data.q).toBe("llama");
    expect(data.models.map((m) => m.id)).toEqual(["meta-llama/llama-3.3-70b-instruct"]);
    expect(data.total).toBeGreaterThan(1);
  });

  it("says so when the catalog is unavailable", async () => {
    await configureAi({ OPENROUTER_API_KEY: "test-key" });
    openrouter.state.listing = "network";
    const data = await load();
    expect(data.error).toMatch(/unavailable/);
    expect(data.models).toEqual([]);
  });
});
