import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as welcomeRoute from "../../app/routes/welcome.tsx";
import { channelSettings } from "../../app/server/agents/channels.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { page } from "../helpers/pages.ts";
import { createDiscordFake } from "../msw/handlers/discord.ts";
import { createTelegramFake } from "../msw/handlers/telegram.ts";
import { mswServer } from "../msw/server.ts";
import { agentUser } from "./support.ts";

// The guided first agent (/welcome): GET steps (name → model → channel) decided by the query,
// the bot token checked on the spot against Telegram/Discord as msw answers them, and the last
// step provisioning the agent and landing on its chat with a first message suggested.

const telegram = createTelegramFake();
const discord = createDiscordFake();
const TG = "123456789:AAE_valid-telegram-token";
const DC = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.valid.discord-token";

beforeAll(() => {
  mswServer.use(...telegram.handlers, ...discord.handlers);
  telegram.state.tokens.add(TG);
  discord.state.tokens.add(DC);
  process.env.AGENT_PROVISION_WAIT_MS = "0"; // no worker here
  resetEnvCache();
});
beforeEach(() => {
  resetRateLimiters();
  telegram.state.down = false;
});

type Step = { step: string; name: string; model: string | null; nameError: string | null };

describe("onboarding steps", () => {
  it("walks name → model → channel by the query, refusing a bad name or an unknown model", async () => {
    const who = await agentUser("solo");
    const first = (await page(welcomeRoute, "/welcome", who)).body as Step & {
      subscribed: boolean;
    };
    expect(first).toMatchObject({ step: "name", subscribed: true, nameError: null });

    const blank = (await page(welcomeRoute, "/welcome?name=+", who)).body as Step;
    expect(blank).toMatchObject({ step: "name", nameError: "Name is required" });

    const named = (await page(welcomeRoute, "/welcome?name=Ada", who)).body as Step & {
      models: Array<{ id: string; perMillion: unknown }>;
    };
    expect(named).toMatchObject({ step: "model", name: "Ada" });
    expect(named.models.at(-1)).toMatchObject({ id: "custom", perMillion: null });

    const unknown = (await page(welcomeRoute, "/welcome?name=Ada&model=nope%2Fnope", who))
      .body as Step & { modelError: string | null };
    expect(unknown).toMatchObject({ step: "model", modelError: "Choose one of the models below" });

    const last = (await page(welcomeRoute, "/welcome?name=Ada&model=custom", who)).body as Step;
    expect(last).toMatchObject({ step: "channel", name: "Ada", model: "custom" });
  });

  it("sends a signed-out visitor to sign in", async () => {
    const res = await page(welcomeRoute, "/welcome", undefined);
    expect(res.status).toBe(302);
    expect(res.location).toBe("/signin?redirectTo=%2Fwelcome");
  });
});

describe("bot token check", () => {
  it("names the bot for a good token and puts a refused one on the token field", async () => {
    const who = await agentUser("solo");
    const good = await page(welcomeRoute, "/welcome", who, {
      intent: "check-token",
      channel: "telegram",
      token: TG,
    });
    expect(good).toMatchObject({ status: 200, body: { value: { botName: "@test_agent_bot" } } });

    const bad = await page(welcomeRoute, "/welcome", who, {
      intent: "check-token",
      channel: "telegram",
      token: "1:wrong",
    });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({
      result: { error: { token: ["Telegram refused this token (Unauthorized)"] } },
    });

    const discordOk = await page(welcomeRoute, "/welcome", who, {
      intent: "check-token",
      channel: "discord",
      token: DC,
    });
    expect(discordOk).toMatchObject({
      status: 200,
      body: { value: { botName: expect.any(String) } },
    });

    telegram.state.down = true;
    const down = await page(welcomeRoute, "/welcome", who, {
      intent: "check-token",
      channel: "telegram",
      token: TG,
    });
    expect(down.status).toBe(502);
    expect(down.body).toMatchObject({ error: expect.stringMatching(/^Telegram could not check/) });
  });
});

describe("create", () => {
  it("provisions with a checked Telegram token stored sealed, and lands on the chat", async () => {
    const who = await agentUser("solo");
    const res = await page(welcomeRoute, "/welcome", who, {
      intent: "create",
      name: "Ada",
      model: "custom",
      channel: "telegram",
      token: TG,
    });
    expect(res.status).toBe(303);
    const m = /^\/agents\/(agt_\w+)\/chat\?suggest=(.+)$/.exec(res.location ?? "");
    expect(m?.[2]).toBeDefined();
    expect(decodeURIComponent(m![2]!)).toMatch(/^Hi!/);
    const [agent] = await db()<{ name: string; model: string }[]>`
      select name, model from agents where id = ${m![1]!} and user_id = ${who.id}`;
    expect(agent).toEqual({ name: "Ada", model: "custom" });
    expect((await channelSettings(who.id)).chatapp1?.token).toBe(TG);
    const [sealed] = await db()<{ sealed: string }[]>`
      select sealed from channel_credentials where user_id = ${who.id}`;
    expect(sealed?.sealed).not.toContain(TG);
  });

  it("refuses a chosen chat app without a token, and a bad token, creating nothing", async () => {
    const who = await agentUser("solo");
    const missing = await page(welcomeRoute, "/welcome", who, {
      intent: "create",
      name: "Ada",
      model: "custom",
      channel: "telegram",
      token: "",
    });
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({ result: { error: { token: [expect.any(String)] } } });
    const bad = await page(welcomeRoute, "/welcome", who, {
      intent: "create",
      name: "Ada",
      model: "custom",
      channel: "discord",
      token: "nope",
    });
    expect(bad.status).toBe(400);
    const rows = await db()<{ count: number }[]>`
      select count(*)::int as count from agents where user_id = ${who.id}`;
    expect(rows[0]?.count).toBe(0);
  });

  it("without a plan: the page says so and a create is refused with 402", async () => {
    const who = await agentUser();
    const shown = (await page(welcomeRoute, "/welcome", who)).body as { subscribed: boolean };
    expect(shown.subscribed).toBe(false);
    const res = await page(welcomeRoute, "/welcome", who, {
      intent: "create",
      name: "Ada",
      model: "custom",
      channel: "none",
    });
    expect(res.status).toBe(402);
  });
});
