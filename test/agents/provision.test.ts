import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as agentRoute from "../../app/routes/api.agent.ts";
import * as provisionRoute from "../../app/routes/api.provision.ts";
import { ensureInstanceRecord, updateInstance } from "../../app/server/agents/instances.server.ts";
import { generateDeviceIdentity } from "../../app/server/openclaw/device-identity.server.ts";
import { seal } from "../../app/server/platform/crypto.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { resetRateLimiters } from "../../app/server/platform/rate-limit.server.ts";
import { call } from "../helpers/api.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";
import { createDiscordFake } from "../msw/handlers/discord.ts";
import { createMuxFake } from "../msw/handlers/mux.ts";
import { createTelegramFake } from "../msw/handlers/telegram.ts";
import { mswServer } from "../msw/server.ts";

// POST /api/provision against Telegram, Discord and Mux as msw answers them on the wire: token
// checks (400 naming the channel), the live stream, the records, and 502 with nothing kept
// when a provider or the gateway is down.

const telegram = createTelegramFake();
const discord = createDiscordFake();
const mux = createMuxFake();
const TG = "123456789:AAE_valid-telegram-token";
const DC = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.valid.discord-token";

beforeAll(() => {
  mswServer.use(...telegram.handlers, ...discord.handlers, ...mux.handlers);
  telegram.state.tokens.add(TG);
  discord.state.tokens.add(DC);
});

beforeEach(() => {
  Object.assign(process.env, { MUX_TOKEN_ID: "mux-token-id", MUX_TOKEN_SECRET: "mux-secret" });
  resetEnvCache();
  resetRateLimiters();
  telegram.state.down = false;
  discord.state.down = false;
  mux.state.down = false;
});

let seq = 0;
const newUser = () => `usr_prov_${++seq}`;
// A fresh client address per call unless given: the per-IP limit is tested on its own.
let ipSeq = 0;
const nextIp = () => `198.51.${Math.floor(++ipSeq / 250)}.${ipSeq % 250}`;
const provision = async (userId: string, body: unknown, remoteAddress = nextIp()) =>
  call(provisionRoute, "/api/provision", {
    method: "POST",
    body,
    headers: { cookie: await sessionCookieFor(userId) },
    remoteAddress,
  });

async function leftovers(userId: string) {
  const [counts] = await db()<Record<string, number>[]>`select
    (select count(*)::int from instances where user_id = ${userId}) as instances,
    (select count(*)::int from agents where user_id = ${userId}) as agents,
    (select count(*)::int from live_streams where user_id = ${userId}) as streams,
    (select count(*)::int from channel_credentials where user_id = ${userId}) as channels`;
  return counts;
}
const nothing = { instances: 0, agents: 0, streams: 0, channels: 0 };

describe("POST /api/provision", () => {
  it("checks the tokens, creates the live stream, the instance and the agent", async () => {
    const userId = newUser();
    const created = mux.state.created;
    const res = await provision(userId, {
      chatapp1Token: TG,
      chatapp1UserId: "4242",
      chatapp2BotToken: DC,
      chatapp2GuildId: "111",
      aiProvider: "anthropic",
      apiKey: "sk-ant-user-key-1234",
    });
    expect(res.status).toBe(200);
    const stream = [...mux.state.streams.values()].at(-1)!;
    expect(mux.state.created).toBe(created + 1);
    expect(stream.passthrough).toBe(userId);
    const playbackId = stream.playback_ids[0]!.id;
    expect(res.json).toEqual({
      success: true,
      userId,
      agentId: expect.stringMatching(/^agt_/),
      id: userId,
      aiProvider: "anthropic",
      aiProviderConfig: {
        model: expect.stringMatching(/^anthropic\//),
        baseUrl: expect.stringMatching(/\/api\/ai\/v1$/),
        requiresKey: false,
      },
      plan: "free",
      streamKey: stream.stream_key,
      liveStreamId: stream.id,
      rtmpServer: "rtmps://global-live.mux.com:443/app",
      playbackUrl: `https://stream.mux.com/${playbackId}.m3u8`,
      subdomain: expect.stringContaining(userId),
      // The address that works on this installation: the path form locally (decision 0115).
      url: `${process.env.APP_URL ?? "http://localhost:3000"}/agents/${userId}/ui/`,
      hls: { playlistUrl: `https://stream.mux.com/${playbackId}.m3u8` },
      rtmp: { server: "rtmps://global-live.mux.com:443/app", key: stream.stream_key },
      status: "active",
      createdAt: expect.any(String),
      metadata: {
        channels: { chatapp1: true, chatapp2: true, chatapp3: false },
        streaming: {
          provider: "mux",
          lowLatency: true,
          resolution: expect.any(String),
          bitrate: expect.any(String),
        },
      },
    });
    expect(await leftovers(userId)).toEqual({ instances: 1, agents: 1, streams: 1, channels: 2 });
    // Secrets sealed at rest.
    const [row] = await db()`select stream_key_sealed from live_streams where user_id = ${userId}`;
    expect(String(row?.stream_key_sealed)).not.toContain(stream.stream_key);
    const tokens = await db()`select sealed, details from channel_credentials
      where user_id = ${userId} order by channel`;
    expect(
      tokens.map((t) => String(t.sealed).includes(TG) || String(t.sealed).includes(DC)),
    ).toEqual([false, false]);
    expect(tokens[0]?.details).toEqual({ userId: "4242" });
    // The worker is asked to provision the new instance.
    const [instance] = await db()`select id, plan, model from instances where user_id = ${userId}`;
    expect(instance?.model).toMatch(/^anthropic\//);
    const jobs = await db()`select 1 from pgboss.job where name = 'provision-instance'
      and data->>'instanceId' = ${instance?.id as string}`;
    expect(jobs).toHaveLength(1);
    // The key became the user's own key in the AI layer; the credential map shows it.
    const creds = await call(agentRoute, "/api/agent?action=credentials", {
      headers: { cookie: await sessionCookieFor(userId) },
    });
    expect(creds.json.credentials).toEqual({
      openai: false,
      anthropic: true,
      google: false,
      openrouter: false,
      chatapp1: true,
      chatapp2: true,
      chatapp3: false,
    });

    // userId is always the caller's: naming another user changes nothing.
    const stranger = await call(agentRoute, `/api/agent?action=credentials&userId=${userId}`, {
      headers: { cookie: await sessionCookieFor("usr_prov_stranger") },
    });
    expect(Object.values(stranger.json.credentials).every((v) => v === false)).toBe(true);

    // Provisioning again updates the same instance and keeps the same stream.
    const again = await provision(userId, { chatapp3Token: "whatsapp-link-ref" });
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({
      liveStreamId: stream.id,
      agentId: res.json.agentId,
      metadata: { channels: { chatapp1: true, chatapp2: true, chatapp3: true } },
    });
    expect(mux.state.created).toBe(created + 1);
    expect(await leftovers(userId)).toEqual({ instances: 1, agents: 1, streams: 1, channels: 3 });
  });

  it("answers 400 for missing or invalid input, naming the refused channel", async () => {
    const userId = newUser();
    const before = mux.state.created;
    const none = await provision(userId, { aiProvider: "openai" });
    expect(none.status).toBe(400);
    expect(none.json.error).toMatch(/At least one channel token/);
    const provider = await provision(userId, { chatapp1Token: TG, aiProvider: "mistral" });
    expect(provider.status).toBe(400);
    expect(provider.json.error).toMatch(/aiProvider/);
    const plan = await provision(userId, { chatapp1Token: TG, plan: "platinum" });
    expect(plan.status).toBe(400);
    expect(plan.json.error).toMatch(/plan/);

    const badTg = await provision(userId, { chatapp1Token: "999:wrong-token" });
    expect(badTg.status).toBe(400);
    expect(badTg.json.error).toMatch(/chatapp1/);
    const malformed = await provision(userId, { chatapp1Token: "not a token/../x" });
    expect(malformed.status).toBe(400);
    expect(malformed.json.error).toMatch(/chatapp1/);
    const badDc = await provision(userId, { chatapp1Token: TG, chatapp2BotToken: "wrong" });
    expect(badDc.status).toBe(400);
    expect(badDc.json.error).toMatch(/chatapp2/);
    expect(mux.state.created).toBe(before);
    expect(await leftovers(userId)).toEqual(nothing);
    // A paid plan needs a subscription covering it.
    expect((await provision(userId, { chatapp1Token: TG, plan: "label" })).status).toBe(402);
    expect(
      (await call(provisionRoute, "/api/provision", { method: "POST", body: {} })).status,
    ).toBe(401);
  });

  it("answers 502 and keeps nothing when a provider or the gateway is down", async () => {
    const userId = newUser();
    telegram.state.down = true;
    const tgDown = await provision(userId, { chatapp1Token: TG });
    expect(tgDown.status).toBe(502);
    expect(tgDown.json.error).toMatch(/chatapp1/);
    telegram.state.down = false;

    discord.state.down = true;
    expect((await provision(userId, { chatapp2BotToken: DC })).status).toBe(502);
    discord.state.down = false;

    mux.state.down = true;
    const muxDown = await provision(userId, { chatapp1Token: TG });
    expect(muxDown.status).toBe(502);
    expect(muxDown.json.error).toMatch(/Streaming provider/);
    mux.state.down = false;
    expect(await leftovers(userId)).toEqual(nothing);

    // A user whose gateway does not answer: 502 before any stream is created.
    const withGateway = newUser();
    await ensureUser(withGateway);
    const row = await ensureInstanceRecord(withGateway, { plan: "solo" });
    await updateInstance(row.id, {
      gateway_address: "127.0.0.1:9",
      device_private_key_sealed: seal(generateDeviceIdentity().privateKeyPem),
      paired_at: new Date(),
    });
    const before = mux.state.created;
    const down = await provision(withGateway, { chatapp1Token: TG });
    expect(down.status).toBe(502);
    expect(mux.state.created).toBe(before);
    expect(await leftovers(withGateway)).toEqual({ ...nothing, instances: 1 });
  });

  it("answers 503 when streaming is not configured, before checking anything", async () => {
    delete process.env.MUX_TOKEN_ID;
    resetEnvCache();
    const calls = telegram.state.calls;
    const res = await provision(newUser(), { chatapp1Token: TG });
    expect(res.status).toBe(503);
    expect(res.json.error).toMatch(/MUX_TOKEN_ID/);
    expect(telegram.state.calls).toBe(calls);
  });

  it("limits requests per IP address", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      statuses.push((await provision(newUser(), {}, "203.0.113.99")).status);
    }
    expect(statuses.slice(0, 10).every((s) => s === 400)).toBe(true);
    expect(statuses[10]).toBe(429);
  });
});
