import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { sweepStaleReservations, userStanding } from "../../app/server/ai/budgets.server.ts";
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

    // A process crashed holding 700 µUSD 11 minutes ago; another holds 300 right now.
    await db()`update ai_accounts set held_micro_usd = 1000 where user_id = 'usr_sweep'`;
    await db()`insert into ai_reservations (id, user_id, amount_micro_usd, created_at) values
      ('res_old', 'usr_sweep', 700, now() - interval '11 minutes'),
      ('res_new', 'usr_sweep', 300, now())`;
    expect(await sweepStaleReservations()).toBe(1);
    expect((await userStanding("usr_sweep")).held).toBe(300);
    const left = await db()`select id from ai_reservations where user_id = 'usr_sweep'`;
    expect(left.map((r) => r.id)).toEqual(["res_new"]);
  });
});
