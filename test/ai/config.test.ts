import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { userStanding } from "../../app/server/ai/budgets.server.ts";
import { sweepStaleReservations } from "../../app/server/ai/hold-renewal.server.ts";
import { configuredProviders } from "../../app/server/ai/providers.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { parseEnv } from "../../app/server/platform/env.server.ts";
import { configureAi, giveCredits } from "./support.ts";

describe("AI configuration", () => {
  it("parses the AI lines of .env.example as they are (empty values mean unset)", () => {
    const vars = Object.fromEntries(
      readFileSync(".env.example", "utf8")
        .split("\n")
        .filter((l) => /^(OPENAI|ANTHROPIC|GOOGLE|OPENROUTER|AI)_[A-Z_]*=/.test(l))
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
    const env = parseEnv(vars);
    expect(env.OPENAI_API_KEY).toBeUndefined();
    expect(env.AI_DAILY_LIMIT_USD).toBe(20);
    expect(env.AI_CATALOG_REFRESH_CRON).toBe("17 * * * *");
  });

  it("configures a provider by key, or by a base URL of its own without a key", async () => {
    await configureAi({ ANTHROPIC_API_KEY: "k", OPENAI_BASE_URL: "http://127.0.0.1:11434/v1/" });
    expect(configuredProviders()).toEqual([
      { name: "openai", apiKey: undefined, baseUrl: "http://127.0.0.1:11434/v1", custom: true },
      { name: "anthropic", apiKey: "k", baseUrl: "https://api.anthropic.com", custom: false },
    ]);
  });

  it("rejects a base URL that is not a URL", () => {
    expect(() => parseEnv({ OPENAI_BASE_URL: "not a url" })).toThrow(/OPENAI_BASE_URL/);
  });
});

describe("credit accounts", () => {
  it("mirror the ledger whoever writes it, and release stale reservations", async () => {
    await giveCredits("usr_sweep", 5_000);
    await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason)
      values ('led_refund', 'usr_sweep', -1000, 'refund')`;
    expect((await userStanding("usr_sweep")).balance).toBe(4_000);
    await db()`delete from credit_ledger where id = 'led_refund'`;
    expect((await userStanding("usr_sweep")).balance).toBe(5_000);

    // A process crashed holding 700 µUSD, last renewed 2 minutes ago; another holds 300 now.
    await db()`update ai_accounts set held_micro_usd = 1000 where user_id = 'usr_sweep'`;
    await db()`insert into ai_reservations (id, user_id, amount_micro_usd, renewed_at) values
      ('res_old', 'usr_sweep', 700, now() - interval '2 minutes'),
      ('res_new', 'usr_sweep', 300, now())`;
    expect(await sweepStaleReservations()).toBe(1);
    expect((await userStanding("usr_sweep")).held).toBe(300);
    const left = await db()`select id from ai_reservations where user_id = 'usr_sweep'`;
    expect(left.map((r) => r.id)).toEqual(["res_new"]);
  });
});

describe("daily usage", () => {
  it("sums tokens and cost per UTC day and model", async () => {
    const { dailyUsage } = await import("../../app/server/ai/usage.server.ts");
    const row = (id: string, model: string, cost: number, at: string) =>
      db()`insert into ai_usage (id, user_id, endpoint, provider, model, prompt_tokens,
          completion_tokens, cost_micro_usd, billing_mode, latency_ms, status, http_status,
          created_at)
        values (${id}, 'usr_daily', 'agents', 'openai', ${model}, 10, 5, ${cost}, 'credits', 3,
          'ok', 200, ${at})`;
    await row("u1", "openai/gpt-4o", 100, new Date().toISOString());
    await row("u2", "openai/gpt-4o", 50, new Date().toISOString());
    await row("u3", "openai/gpt-4o-mini", 6, new Date().toISOString());
    await row("u4", "openai/gpt-4o", 999, "2000-01-01T00:00:00Z");
    const usage = await dailyUsage("usr_daily", 7);
    const today = new Date().toISOString().slice(0, 10);
    expect(usage).toEqual([
      {
        day: today,
        model: "openai/gpt-4o",
        calls: 2,
        promptTokens: 20,
        completionTokens: 10,
        costMicroUsd: 150,
      },
      {
        day: today,
        model: "openai/gpt-4o-mini",
        calls: 1,
        promptTokens: 10,
        completionTokens: 5,
        costMicroUsd: 6,
      },
    ]);
  });
});
