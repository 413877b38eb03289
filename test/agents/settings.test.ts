import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as listRoute from "../../app/routes/agents._index.tsx";
import * as settingsRoute from "../../app/routes/agents.$id.settings.tsx";
import { CONFIG_MAX_BYTES, configFormSchema } from "../../app/schemas/agents.ts";
import { getOwnedAgent } from "../../app/server/agents/agents.server.ts";
import {
  channelSettings,
  storeChannelCredential,
} from "../../app/server/agents/channels.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { page } from "../helpers/pages.ts";
import { agentUser } from "./support.ts";

// The settings tab (issue 25: configuration as forms): name, model and persona in one
// revision; who may talk on Telegram; the heartbeat's validation before the gateway is asked;
// the JSON editor as the advanced view. Errors land on their field; the gateway being away is
// an error on the form, not a 500.

type Who = { id: string; cookie: string };

async function provisioned(who: Who, name = "Scout") {
  const res = await page(listRoute, "/agents?index", who, { name, model: "custom" });
  expect(res.status).toBe(303);
  return /^\/agents\/(agt_\w+)/.exec(res.location ?? "")?.[1] as string;
}

const post = (who: Who, id: string, form: Record<string, string>) =>
  page(settingsRoute, `/agents/${id}/settings`, who, form, { id });

beforeAll(() => {
  process.env.AGENT_PROVISION_WAIT_MS = "0"; // no worker here
  resetEnvCache();
});
beforeEach(() => resetRateLimiters());

describe("settings tab", () => {
  it("shows the forms' values, and is not found for another user", async () => {
    const who = await agentUser("solo");
    const id = await provisioned(who);
    const shown = await page(settingsRoute, `/agents/${id}/settings`, who, undefined, { id });
    expect(shown.body).toMatchObject({
      agent: { id, name: "Scout", model: "custom" },
      persona: "",
      telegram: { connected: false, owner: "" },
      heartbeat: null,
      heartbeatError: expect.stringMatching(/not provisioned/),
      models: expect.arrayContaining([expect.objectContaining({ id: "custom" })]),
    });
    const other = await agentUser("solo");
    const refused = await page(settingsRoute, `/agents/${id}/settings`, other, undefined, { id });
    expect(refused.status).toBe(404);
    const posted = await post(other, id, { intent: "profile", name: "Mine", model: "custom" });
    expect(posted.status).toBe(404);
  });

  it("saves name, model and persona in one revision; refuses bad values on their field", async () => {
    const who = await agentUser("solo");
    const id = await provisioned(who);
    const before = await getOwnedAgent(who.id, id);

    const blank = await post(who, id, { intent: "profile", name: " ", model: "custom" });
    expect(blank.status).toBe(400);
    expect(blank.body).toMatchObject({ result: { error: { name: ["Name is required"] } } });
    const unknown = await post(who, id, { intent: "profile", name: "Ada", model: "x/unknown" });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({
      result: { error: { model: ["Choose one of the listed models"] } },
    });
    const long = await post(who, id, {
      intent: "profile",
      name: "Ada",
      model: "custom",
      persona: "x".repeat(2001),
    });
    expect(long.body).toMatchObject({
      result: { error: { persona: ["At most 2000 characters"] } },
    });

    const ok = await post(who, id, {
      intent: "profile",
      name: "Ada",
      model: "custom",
      persona: "A patient tutor; short answers.",
    });
    expect(ok).toMatchObject({
      status: 200,
      body: { error: null, value: { message: expect.any(String) } },
    });
    const after = await getOwnedAgent(who.id, id);
    expect(after).toMatchObject({
      name: "Ada",
      config: { identity: { theme: "A patient tutor; short answers." } },
    });
    expect(after.config_revision).toBe(before.config_revision + 1);

    // An empty persona removes it (and an identity left empty goes too).
    await post(who, id, { intent: "profile", name: "Ada", model: "custom", persona: "" });
    expect((await getOwnedAgent(who.id, id)).config).toEqual({});
  });

  it("sets who may talk on Telegram, once a bot is connected", async () => {
    const who = await agentUser("solo");
    const id = await provisioned(who);
    const none = await post(who, id, { intent: "access", telegramOwner: "12345" });
    expect(none.status).toBe(400);
    expect(none.body).toMatchObject({
      error: expect.stringMatching(/Connect a Telegram bot first/),
    });

    await storeChannelCredential(who.id, "chatapp1", { token: "1:tok", details: { x: "y" } });
    const bad = await post(who, id, { intent: "access", telegramOwner: "@me" });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ result: { error: { telegramOwner: [expect.any(String)] } } });
    const ok = await post(who, id, { intent: "access", telegramOwner: "12345" });
    expect(ok.status).toBe(200);
    expect((await channelSettings(who.id)).chatapp1).toEqual({
      token: "1:tok",
      details: { x: "y", userId: "12345" },
    });
    await post(who, id, { intent: "access", telegramOwner: "" });
    expect((await channelSettings(who.id)).chatapp1?.details).toEqual({ x: "y" });
  });

  it("checks the heartbeat before asking the gateway, and says when the gateway is away", async () => {
    const who = await agentUser("solo");
    const id = await provisioned(who);
    const odd = await post(who, id, { intent: "heartbeat", enabled: "on", every: "often" });
    expect(odd.body).toMatchObject({
      result: { error: { every: ["Write it like 30m, 2h or 1h30m"] } },
    });
    const tooOften = await post(who, id, { intent: "heartbeat", enabled: "on", every: "1m" });
    expect(tooOften.status).toBe(400);
    expect(tooOften.body).toMatchObject({
      result: { error: { every: [expect.stringMatching(/between 5m and 24h/)] } },
    });
    const away = await post(who, id, { intent: "heartbeat", enabled: "on", every: "2h" });
    expect(away.status).toBe(502);
    expect(away.body).toMatchObject({
      error: expect.stringMatching(/not provisioned/),
      value: null,
    });
  });

  it("saves a valid configuration and refuses what is not a JSON object or too large", async () => {
    const who = await agentUser("solo");
    const id = await provisioned(who);
    const save = (config: string) =>
      page(settingsRoute, `/agents/${id}/settings`, who, { intent: "config", config }, { id });

    for (const [text, message] of [
      ["{ nope", /Not valid JSON/],
      ["[1, 2]", /must be a JSON object/],
      ["42", /must be a JSON object/],
      [JSON.stringify({ blob: "x".repeat(CONFIG_MAX_BYTES) }), /larger than 64 KiB/],
    ] as const) {
      const res = await save(text);
      expect(res.status, text.slice(0, 20)).toBe(400);
      expect(res.body).toMatchObject({
        result: { error: { config: [expect.stringMatching(message)] } },
      });
    }
    // Indentation does not count against the cap (it is measured as compact JSON, like the API).
    const roomy = `{\n${" ".repeat(CONFIG_MAX_BYTES)}"identity": {"name": "Scout"}\n}`;
    expect(configFormSchema.safeParse({ config: roomy }).success).toBe(true);

    const before = await getOwnedAgent(who.id, id);
    const ok = await save(JSON.stringify({ identity: { name: "Scout" }, notes: "mine" }, null, 2));
    expect(ok).toMatchObject({ status: 200, body: { value: { message: "Configuration saved." } } });
    const after = await getOwnedAgent(who.id, id);
    expect(after.config).toEqual({ identity: { name: "Scout" }, notes: "mine" });
    expect(after.config_revision).toBe(before.config_revision + 1);
  });
});
