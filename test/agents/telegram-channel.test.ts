import { afterAll, beforeAll, expect, it } from "vitest";
import * as channelsTab from "../../app/routes/agents.$id.channels.tsx";
import * as agentRoute from "../../app/routes/api.agent.ts";
import * as whatsappRoute from "../../app/routes/api.agent.whatsapp.ts";
import * as messagesRoute from "../../app/routes/api.agents.$id.messages.ts";
import * as provisionRoute from "../../app/routes/api.provision.ts";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import {
  applyChannels,
  channelSettings,
  storeChannelCredential,
} from "../../app/server/agents/channels.server.ts";
import { gatewayClientFor } from "../../app/server/agents/instance-gateway.server.ts";
import { getInstance, type InstanceRow } from "../../app/server/agents/instances.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { connectPaired } from "../../worker/instances/pairing.ts";
import { ChatRecorder } from "../../worker/instances/recorder.ts";
import { giveCredits } from "../ai/support.ts";
import {
  type GatewayBench,
  provisionRealGateway,
  startGatewayBench,
  stopGatewayBench,
} from "../helpers/real-gateway.ts";
import { createDiscordFake } from "../msw/handlers/discord.ts";
import { createMuxFake } from "../msw/handlers/mux.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import { describeDocker, waitFor } from "../runtime/docker-support.ts";
import { type FakeTelegram, startFakeTelegram } from "./fake-telegram.ts";
import { agentUser, asUser } from "./support.ts";

// The chat channels with the real gateway (one instance for the file). Telegram (chatapp1), end
// to end: the
// platform writes the bot token (and the owner as the only allowed sender) into the gateway's
// channels; a person writes to the bot (a local stand-in of the Bot API, TELEGRAM_API_URL, which
// the gateway long-polls); the agent answers through the platform's model endpoint; the bot's
// reply goes out through the Bot API; the platform records both messages with platform chatapp1.
// Discord (chatapp2) and WhatsApp (chatapp3) are OpenClaw plugins baked into the image: a
// provisioned Discord token lands in the gateway's config (discord.com is out of reach here, so
// it does not connect), and WhatsApp linking, which needs WhatsApp's servers, answers 502.

const openai = createOpenAiFake();
const discord = createDiscordFake();
const mux = createMuxFake();
const DISCORD_TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.channels.discord-token";
const OWNER = { id: 424242, first_name: "Ada" };
let bench: GatewayBench | undefined;
let telegram: FakeTelegram;
let recorder: ChatRecorder | undefined;
let user: { id: string; cookie: string };
let agentId: string;
let instance: InstanceRow;

describeDocker("chat channels with the real gateway", () => {
  beforeAll(async () => {
    Object.assign(process.env, { MUX_TOKEN_ID: "mux-token-id", MUX_TOKEN_SECRET: "mux-secret" });
    mswServer.use(...discord.handlers, ...mux.handlers);
    discord.state.tokens.add(DISCORD_TOKEN);
    bench = await startGatewayBench({ openai });
    telegram = await startFakeTelegram();
    process.env.TELEGRAM_API_URL = `http://${bench.gatewayIp}:${telegram.port}`;
    resetEnvCache();

    user = await agentUser("solo");
    await giveCredits(user.id, 5_000_000);
    agentId = (await createAgentRecord(user.id, { name: "Bot", model: "openai/gpt-4o-mini" })).id;
    ({ instance } = await provisionRealGateway(user.id, { model: "openai/gpt-4o-mini" }));
  }, 300_000);

  afterAll(async () => {
    recorder?.stop();
    telegram?.close();
    delete process.env.TELEGRAM_API_URL;
    resetEnvCache();
    await stopGatewayBench(bench);
  });

  it("answers a Telegram message and records both sides as chatapp1", async () => {
    await storeChannelCredential(user.id, "chatapp1", {
      token: telegram.token,
      details: { userId: String(OWNER.id) },
    });
    const { client } = await connectPaired(instance, instance.gateway_address as string);
    try {
      await applyChannels(client, await channelSettings(user.id));
    } finally {
      client.close();
    }
    // The channel starts: it checks the token and begins long polling.
    await waitFor(async () => telegram.calls.includes("getUpdates"), {
      timeoutMs: 120_000,
      what: "the gateway polling the Bot API",
    });

    telegram.userWrites("Hello from Telegram", OWNER);
    const answer = await waitFor(
      async () =>
        telegram.sent.find(
          (m) => m.chatId === String(OWNER.id) && m.text.includes(openai.state.reply),
        ),
      { timeoutMs: 120_000, intervalMs: 500, what: "the bot's reply" },
    ).catch((error) => {
      process.stdout.write(`telegram calls ${JSON.stringify(telegram.calls)}\n`);
      process.stdout.write(`telegram sent ${JSON.stringify(telegram.sent)}\n`);
      throw error;
    });
    expect(answer.text).toContain(openai.state.reply);

    recorder = new ChatRecorder();
    const messages = await waitFor(
      async () => {
        await recorder!.refresh();
        const res = await asUser(user, messagesRoute, `/api/agents/${agentId}/messages`, {
          params: { id: agentId },
        });
        const list = res.json.messages as Array<{
          sender: string;
          content: string;
          platform: string;
        }>;
        const mine = list.filter((m) => m.platform === "chatapp1");
        return mine.some((m) => m.sender === "agent") ? mine : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1_000, what: "the recorded Telegram conversation" },
    );
    expect(messages.find((m) => m.sender === "user")?.content).toContain("Hello from Telegram");
    expect(messages.find((m) => m.sender === "agent")?.content).toContain(openai.state.reply);
  }, 300_000);

  it("loads the Discord and WhatsApp plugins; a provisioned Discord token configures Discord", async () => {
    const t0 = Date.now();
    const res = await asUser(user, provisionRoute, "/api/provision", {
      method: "POST",
      body: {
        chatapp2BotToken: DISCORD_TOKEN,
        chatapp2GuildId: "111111111111111111",
        chatapp2ChannelId: "222222222222222222",
        chatapp3Token: "my-whatsapp",
      },
      remoteAddress: "198.51.100.77",
    });
    process.stdout.write(
      `provision with discord+whatsapp (plugins hot-loaded): ${Date.now() - t0} ms\n`,
    );
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.json.metadata).toMatchObject({ channels: { chatapp2: true, chatapp3: true } });

    const client = await gatewayClientFor((await getInstance(instance.id)) as InstanceRow);
    // config.get redacts secrets; the shape and the plugin enablement are what the platform wrote.
    const config = await client.request<{
      config: {
        channels?: Record<string, Record<string, unknown>>;
        plugins?: { entries?: Record<string, { enabled?: boolean }> };
      };
    }>("config.get");
    expect(config.config.channels?.discord).toMatchObject({
      enabled: true,
      groupPolicy: "allowlist",
      guilds: { "111111111111111111": { channels: { "222222222222222222": { enabled: true } } } },
    });
    expect(config.config.channels?.discord?.token).toBeTruthy();
    expect(config.config.channels?.whatsapp).toMatchObject({ enabled: true });
    expect(config.config.plugins?.entries).toMatchObject({
      discord: { enabled: true },
      whatsapp: { enabled: true },
    });

    // Both plugins are loaded: the gateway reports their channels (Discord configured, trying
    // to reach discord.com; WhatsApp configured, not linked).
    const status = await waitFor(
      async () => {
        const s = await client.request<{
          channelOrder: string[];
          channels: Record<string, { configured?: boolean; linked?: boolean }>;
        }>("channels.status", {});
        return s.channels.discord?.configured && s.channels.whatsapp?.configured ? s : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1_000, what: "discord and whatsapp in channels.status" },
    );
    expect(status.channelOrder).toEqual(
      expect.arrayContaining(["telegram", "discord", "whatsapp"]),
    );
    expect(status.channels.whatsapp?.linked).toBe(false);

    const creds = await asUser(user, agentRoute, "/api/agent?action=credentials");
    expect(creds.json.credentials).toMatchObject({ chatapp2: true, chatapp3: true });
  }, 180_000);

  it("WhatsApp linking answers 502 naming WhatsApp when its servers are out of reach", async () => {
    const state = await asUser(user, whatsappRoute, "/api/agent/whatsapp");
    expect(state.status).toBe(200);
    expect(state.json).toMatchObject({ configured: true, linked: false, connected: false });

    const t0 = Date.now();
    const res = await asUser(user, whatsappRoute, "/api/agent/whatsapp", {
      method: "POST",
      body: { action: "start" },
    });
    process.stdout.write(
      `whatsapp link: ${res.status} in ${Date.now() - t0} ms: ${res.json.error}\n`,
    );
    expect(res.status).toBe(502);
    expect(res.json.error).toMatch(/^WhatsApp linking failed: /);

    // The channels tab: it gets WhatsApp's state; its "Link WhatsApp" form post
    // shows the same failure (no JavaScript needed).
    const shown = (await channelsTab.loader({
      request: new Request(`http://localhost/agents/${agentId}/channels`, {
        headers: { cookie: user.cookie },
      }),
      params: { id: agentId },
      context: { remoteAddress: "127.0.0.1" },
    } as never)) as { whatsapp: { status: { configured: boolean; linked: boolean } | null } };
    expect(shown.whatsapp.status).toMatchObject({ configured: true, linked: false });
    const posted = (await channelsTab.action({
      request: new Request(`http://localhost/agents/${agentId}/channels`, {
        method: "POST",
        headers: {
          cookie: user.cookie,
          origin: "http://localhost",
          "content-type": "application/x-www-form-urlencoded",
        },
        body: new URLSearchParams({ intent: "whatsapp-link" }),
      }),
      params: { id: agentId },
      context: { remoteAddress: "127.0.0.1" },
    } as never)) as unknown as { data: { error: string }; init: { status: number } };
    expect(posted.init.status).toBe(502);
    expect(posted.data).toMatchObject({ value: null, error: expect.stringMatching(/^WhatsApp/) });

    // Another user (no instance, no chatapp3) cannot reach this gateway's WhatsApp.
    const other = await agentUser();
    const refused = await asUser(other, whatsappRoute, "/api/agent/whatsapp", {
      method: "POST",
      body: {},
    });
    expect(refused.status).toBe(400);
  }, 120_000);
});
